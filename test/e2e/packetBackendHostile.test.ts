/**
 * A backend that breaks the protocol in the login and configuration states that Portal reads (offline mode): a Login
 * Success or a Disconnect that cannot be read, a packet that is no login packet. The player is told "The server sent
 * data the proxy could not read." at once, not handed the broken bytes; a backend's readable Disconnect ends the
 * session at once even when the backend keeps its connection open.
 */
import { once } from "node:events"
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { encodeHandshake } from "../../src/protocol/handshake.js"
import { packetIdsFor } from "../../src/protocol/packetIds.js"
import { encodeVarInt } from "../../src/protocol/varint.js"
import { startPortal } from "../helpers/portal.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { connectClient } from "../peers/packetPeers.js"

const PROTOCOL_1_20_4 = 765
const ids = packetIdsFor(PROTOCOL_1_20_4)!

const frame = (packetId: number, body: Buffer): Buffer => {
  const content = Buffer.concat([encodeVarInt(packetId), body])
  return Buffer.concat([encodeVarInt(content.length), content])
}
const string = (text: string): Buffer => Buffer.concat([encodeVarInt(Buffer.byteLength(text)), Buffer.from(text)])
/** A 1.20.4 Login Success: UUID, name, no properties. */
const loginSuccess = (name: string): Buffer => frame(ids.login.clientbound.loginSuccess, Buffer.concat([Buffer.alloc(16, 0x11), string(name), encodeVarInt(0)]))

/**
 * A backend that answers the login with `script`: what it writes once the handshake and Login Start have arrived,
 * and optionally after the player's next packet (Login Acknowledged). It never closes a connection by itself.
 */
const scriptedBackend = async (script: { readonly onLogin: Buffer; readonly afterAcknowledged?: Buffer }) => {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("error", () => {})
    socket.on("close", () => sockets.delete(socket))
    let frames = 0
    let buffered = Buffer.alloc(0)
    socket.on("data", (chunk) => {
      buffered = Buffer.concat([buffered, chunk])
      // Counts whole frames (uncompressed: a VarInt length, then that many bytes).
      for (;;) {
        let length = 0
        let shift = 0
        let at = 0
        for (; at < buffered.length && at < 3; at++) {
          length |= (buffered[at]! & 0x7f) << shift
          shift += 7
          if ((buffered[at]! & 0x80) === 0) break
        }
        if (at >= buffered.length || buffered.length < at + 1 + length) break
        buffered = buffered.subarray(at + 1 + length)
        frames += 1
        if (frames === 2) socket.write(script.onLogin)
        if (frames === 3 && script.afterAcknowledged !== undefined) socket.write(script.afterAcknowledged)
      }
    })
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      for (const socket of sockets) socket.destroy()
      server.close()
    }
  }
}

const closers: Array<() => void> = []
afterEach(() => {
  for (const close of closers.splice(0)) close()
})

const portalBefore = async (backend: { port: number }) => {
  const dir = makeConfigDir(`bind = "127.0.0.1:0"\n`, {
    "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"\n[timeouts]\nread = "60s"\n`
  })
  return startPortal(dir.configFile)
}

describe("a backend that breaks the login", () => {
  const broken: Array<[string, () => { onLogin: Buffer; afterAcknowledged?: Buffer }, RegExp]> = [
    ["a Login Success cut short", () => ({ onLogin: frame(ids.login.clientbound.loginSuccess, Buffer.from([1, 2, 3])) }), /bad packet from the backend: .*Login Success/],
    ["a login Disconnect cut short", () => ({ onLogin: frame(ids.login.clientbound.disconnect, Buffer.from([0x20, 0x41])) }), /bad packet from the backend: .*Disconnect/],
    ["a packet that is no login packet", () => ({ onLogin: frame(0x42, Buffer.from([1, 2, 3])) }), /bad packet from the backend: packet 0x42 is not a login packet/],
    [
      "a configuration Disconnect cut short",
      () => ({ onLogin: loginSuccess("Broken"), afterAcknowledged: frame(ids.configuration!.clientbound.disconnect, Buffer.from([0x08, 0x00, 0x50])) }),
      /bad packet from the backend: .*Disconnect/
    ]
  ]
  for (const [what, script, logLine] of broken) {
    it(`${what}: the player is told the server sent what the proxy could not read, and the log says why`, { timeout: 20_000 }, async () => {
      const backend = await scriptedBackend(script())
      closers.push(backend.close)
      const portal = await portalBefore(backend)
      closers.push(() => void portal.stop())
      const client = connectClient(portal.port, { version: "1.20.4", username: "Broken", host: "off.example" })
      const outcome = await client.joined
      expect(outcome).toEqual({ _tag: "Kicked", reason: "§cThe server sent data the proxy could not read." })
      await portal.waitForLog(logLine)
    })
  }

  it("a backend's Disconnect ends the session at once, once, though the backend keeps its connection open", { timeout: 20_000 }, async () => {
    const reason = JSON.stringify({ text: "Whitelisted players only" })
    const backend = await scriptedBackend({ onLogin: frame(ids.login.clientbound.disconnect, string(reason)) })
    closers.push(backend.close)
    const portal = await portalBefore(backend)
    closers.push(() => void portal.stop())
    const client = connectClient(portal.port, { version: "1.20.4", username: "Refused", host: "off.example" })
    const kicks: Array<unknown> = []
    client.raw.on("disconnect", (packet: { reason: unknown }) => kicks.push(packet.reason))
    const closed = once(client.raw, "end")
    expect(await client.joined).toEqual({ _tag: "Kicked", reason: "Whitelisted players only" })
    // Portal closes the player's connection itself: the read timeout (60 s) is far away.
    await closed
    await portal.waitForLog(/the backend refused the login: Whitelisted players only/)
    await portal.waitForLog(/Refused .*left off/)
    expect(kicks).toHaveLength(1)
  })

  it("a backend that goes silent is told about once, though the player keeps its end open while the session ends", { timeout: 20_000 }, async () => {
    // Accepts the login and then says nothing: the read timeout ends the session.
    const backend = await scriptedBackend({ onLogin: Buffer.alloc(0) })
    closers.push(backend.close)
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n`, {
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"\n[timeouts]\nread = "1s"\n`
    })
    const portal = await startPortal(dir.configFile)
    closers.push(() => void portal.stop())
    // A player that never closes its side: Portal lingers on the session (2 s) after the Disconnect.
    const player = net.connect({ port: portal.port, host: "127.0.0.1", allowHalfOpen: true })
    player.on("error", () => {})
    closers.push(() => player.destroy())
    let received = Buffer.alloc(0)
    player.on("data", (chunk: Buffer) => (received = Buffer.concat([received, chunk])))
    player.write(
      Buffer.concat([
        encodeHandshake({ protocolVersion: PROTOCOL_1_20_4, address: "off.example", port: 25565, nextState: 2 }),
        frame(ids.login.serverbound.loginStart, Buffer.concat([string("Quiet"), Buffer.alloc(16, 0x22)]))
      ])
    )
    await portal.waitForLog(/Quiet .*left off .*read timeout/, 10_000)
    expect(received.toString("utf8")).toContain("The server stopped responding.")
    expect(portal.logs.filter((line) => line.includes("the backend sent nothing for too long"))).toHaveLength(1)
  })
})
