/**
 * Bad input in the packet modes: an encryption response that is wrong (verify token, secret length), a session
 * service that answers 204, 500, garbage or nothing, and packets in play that are oversized or whose compression
 * claims lie. Each gets a disconnect where the protocol allows one and a log line; a player already in play
 * through the same Portal is not affected.
 */
import { createDecipheriv, publicEncrypt, constants, randomBytes } from "node:crypto"
import * as net from "node:net"
import { deflateSync } from "node:zlib"
import { createRequire } from "node:module"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { encodeVarInt } from "../../src/protocol/varint.js"
import { BanStore } from "../../src/services/BanStore.js"
import { startPortal } from "../helpers/portal.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { waitFor } from "../helpers/wait.js"
import { connectClient, type PacketClient, serverChat, startPacketBackend } from "../peers/packetPeers.js"
import { startSessionService } from "../peers/sessionService.js"

const mc = createRequire(import.meta.url)("minecraft-protocol")

const serialize = (state: string, name: string, params: Record<string, unknown>) => {
  const packet: Buffer = mc.createSerializer({ state, isServer: false, version: "1.20.4" }).createPacketBuffer({ name, params })
  return Buffer.concat([encodeVarInt(packet.length), packet])
}

/** A client_only server `on.example` behind Portal, with legacy forwarding, and the session service it asks. */
const startClientOnly = async (options: { workerLogLevel?: "debug" } = {}) => {
  const session = await startSessionService()
  process.env.PORTAL_SESSION_SERVER = session.url
  const backend = await startPacketBackend()
  const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, {
    "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "client_only"`
  })
  return { session, backend, portal: await startPortal(dir.configFile, options) }
}

/** Portal with one `offline` server (off.example, `server` added to its file) in front of a packet backend. */
const startOffline = async (server = "") => {
  const backend = await startPacketBackend()
  const dir = makeConfigDir(`bind = "127.0.0.1:0"\n`, {
    "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"\n${server}`
  })
  return { backend, portal: await startPortal(dir.configFile) }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Ticks the bystander received after `from`: proof that it kept playing. */
const keepsPlaying = async (bystander: PacketClient) => {
  const before = bystander.chat.length
  await sleep(2100)
  expect(bystander.chat.length).toBeGreaterThan(before)
}

/**
 * A hand-made 1.20.4 online login up to the Encryption Response, whose secret and token the test chooses; resolves
 * with every byte Portal sent after the Encryption Request (still encrypted if Portal encrypted it).
 */
const badEncryption = (port: number, choose: (token: Buffer) => { secret: Buffer; token: Buffer }) =>
  new Promise<{ after: Buffer; secret: Buffer }>((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    socket.on("error", () => {})
    let buffer = Buffer.alloc(0)
    let chosen: { secret: Buffer; token: Buffer } | undefined
    let after = Buffer.alloc(0)
    socket.on("data", (chunk) => {
      if (chosen !== undefined) {
        after = Buffer.concat([after, chunk])
        return
      }
      buffer = Buffer.concat([buffer, chunk])
      let length = 0
      let size = 0
      for (let byte = 0x80; (byte & 0x80) !== 0; size++) {
        byte = buffer[size]!
        length |= (byte & 0x7f) << (7 * size)
      }
      if (buffer.length < size + length) return
      const request = mc.createDeserializer({ state: "login", isServer: false, version: "1.20.4" }).parsePacketBuffer(buffer.subarray(size, size + length))
      const { publicKey, verifyToken } = request.data.params as { publicKey: Buffer; verifyToken: Buffer }
      chosen = choose(verifyToken)
      const key = { key: Buffer.from(publicKey), format: "der" as const, type: "spki" as const, padding: constants.RSA_PKCS1_PADDING }
      socket.write(
        serialize("login", "encryption_begin", {
          sharedSecret: publicEncrypt(key, chosen.secret),
          verifyToken: publicEncrypt(key, chosen.token)
        })
      )
    })
    socket.on("close", () => resolve({ after, secret: chosen?.secret ?? Buffer.alloc(0) }))
    socket.write(
      Buffer.concat([
        serialize("handshaking", "set_protocol", { protocolVersion: 765, serverHost: "on.example", serverPort: 25565, nextState: 2 }),
        serialize("login", "login_start", { username: "Mallory", playerUUID: "00000000-0000-0000-0000-00000000abcd" })
      ])
    )
    setTimeout(() => socket.destroy(), 5000)
  })

/** Sends `bytes` as a new connection and resolves with everything Portal sent until it closed (plain text). */
const sendAndRead = (port: number, bytes: Buffer, timeoutMs = 10_000) =>
  new Promise<string>((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    let received = Buffer.alloc(0)
    socket.on("error", () => {})
    socket.on("data", (chunk) => {
      received = Buffer.concat([received, chunk])
    })
    socket.on("close", () => resolve(received.toString("utf8")))
    socket.write(bytes)
    setTimeout(() => socket.destroy(), timeoutMs)
  })

describe("bad input in the packet modes", () => {
  it("a wrong verify token, a secret of the wrong length, and a session service that says no, fails or hangs", { timeout: 40_000 }, async () => {
    // Debug lines from the workers too: the player who leaves during the session check is told at debug level.
    const { session, backend, portal } = await startClientOnly({ workerLogLevel: "debug" })
    const bystander = connectClient(portal.port, { version: "1.21.4", username: "Bystander", host: "on.example", session })
    expect((await bystander.joined)._tag).toBe("Joined")

    // The right secret, a wrong token: the client encrypts from its response on, so the Disconnect is encrypted.
    const wrongToken = await badEncryption(portal.port, () => ({ secret: randomBytes(16), token: Buffer.from("nope") }))
    const decipher = createDecipheriv("aes-128-cfb8", wrongToken.secret, wrongToken.secret)
    expect(decipher.update(wrongToken.after).toString("utf8")).toMatch(/could not be encrypted/)
    await portal.waitForLog(/refused Mallory.*the verify token does not match/)

    // A secret of 15 bytes: nothing can be encrypted for it; the Disconnect goes as it is.
    const shortSecret = await badEncryption(portal.port, (token) => ({ secret: randomBytes(15), token }))
    expect(shortSecret.after.toString("utf8")).toMatch(/could not be encrypted/)
    await portal.waitForLog(/refused Mallory.*bad shared secret/)

    const cases: Array<[typeof session.mode, RegExp, RegExp]> = [
      ["204", /Failed to verify your username/, /not authenticated/],
      ["500", /authentication servers are unreachable/, /answered HTTP 500/],
      ["garbage", /authentication servers are unreachable/, /answered something that is not a profile/],
      ["hang", /authentication servers are unreachable/, /failed: no answer in time/]
    ]
    for (const [mode, reason, logLine] of cases) {
      session.mode = mode
      const client = connectClient(portal.port, { version: "1.20.4", username: `Mode${mode}`, host: "on.example", session })
      expect(await client.joined).toEqual({ _tag: "Kicked", reason: expect.stringMatching(reason) })
      await portal.waitForLog(logLine)
    }
    expect(backend.players.has("Mallory")).toBe(false)

    // A player who leaves while the session service is asked: a line says so, and the backend never sees them.
    session.mode = "slow"
    const leaver = connectClient(portal.port, { version: "1.20.4", username: "Leaver", host: "on.example", session })
    await waitFor(() => session.asked.some((ask) => ask.username === "Leaver"), { what: "the session service asked about Leaver" })
    leaver.raw.socket.destroy()
    await portal.waitForLog(/Leaver \(.*\) left while the session service was asked/)
    expect(backend.players.has("Leaver")).toBe(false)
    session.mode = "normal"
    await keepsPlaying(bystander)
  })

  it("a malformed Login Start, an oversized Encryption Response and a login that stops are told why, not just closed", { timeout: 20_000 }, async () => {
    const { portal } = await startClientOnly()
    const handshake = serialize("handshaking", "set_protocol", { protocolVersion: 765, serverHost: "on.example", serverPort: 25565, nextState: 2 })
    const longName = serialize("login", "login_start", { username: "x".repeat(40), playerUUID: "00000000-0000-0000-0000-00000000abcd" })
    expect(await sendAndRead(portal.port, Buffer.concat([handshake, longName]))).toMatch(/Your client sent a packet the proxy could not read/)
    await portal.waitForLog(/WARN refused a login: the client sent a packet the proxy could not read \(.*player name of 40 characters is too long/)

    const start = serialize("login", "login_start", { username: "Mallory", playerUUID: "00000000-0000-0000-0000-00000000abcd" })
    const huge = Buffer.concat([encodeVarInt(100_001), Buffer.from([0x01]), Buffer.alloc(100_000, 7)])
    const afterHuge = await sendAndRead(portal.port, Buffer.concat([handshake, start, huge]))
    // The Encryption Request first, then the Disconnect (plain: the secret could not be read).
    expect(afterHuge).toMatch(/Your client sent a packet the proxy could not read/)

    // A handshake for a login, then nothing: after the handshake timeout (5 s), the player is told.
    expect(await sendAndRead(portal.port, handshake)).toMatch(/Took too long to log in/)
  })

  it("a player banned by UUID is refused after authentication, even when Login Start claimed another UUID", { timeout: 20_000 }, async () => {
    const { session, backend, portal } = await startClientOnly()
    const account = session.account("Banned")
    await portal.run(Effect.flatMap(BanStore, (store) => store.add({ target: { type: "uuid", value: account.id }, reason: "Alt account", source: "test" })))
    // 1.12.2 sends no UUID in Login Start; the 1.21.4 client is made to claim another one.
    const quiet = connectClient(portal.port, { version: "1.12.2", username: "Banned", host: "on.example", session })
    expect(await quiet.joined).toEqual({ _tag: "Kicked", reason: expect.stringMatching(/Alt account/) })
    const liar = connectClient(portal.port, { version: "1.21.4", username: "Banned", host: "on.example", session })
    const write = liar.raw.write.bind(liar.raw)
    liar.raw.write = (name: string, params: Record<string, unknown>) =>
      write(name, name === "login_start" ? { ...params, playerUUID: "00000000-0000-0000-0000-000000000001" } : params)
    expect(await liar.joined).toEqual({ _tag: "Kicked", reason: expect.stringMatching(/Alt account/) })
    await portal.waitForLog(/refused Banned \(.*\): banned \(Alt account\)/)
    expect(backend.players.has("Banned")).toBe(false)
  })

  it("an oversized packet, a compressed frame that inflates to more than it claims, and one that claims less than the threshold", { timeout: 30_000 }, async () => {
    const { backend, portal } = await startOffline()
    const bystander = connectClient(portal.port, { version: "1.20.4", username: "Bystander", host: "off.example" })
    expect((await bystander.joined)._tag).toBe("Joined")
    // Under compression (threshold 256): VarInt packetLength | VarInt dataLength | zlib data.
    const compressed = (claimed: number, data: Buffer) => {
      const zlib = deflateSync(data)
      const content = Buffer.concat([encodeVarInt(claimed), zlib])
      return Buffer.concat([encodeVarInt(content.length), content])
    }
    const cases: Array<[string, Buffer, RegExp]> = [
      ["Huge", Buffer.from([0x80, 0x80, 0x80, 0x80, 0x01]), /frame length wider than 21 bits/],
      ["Liar", compressed(300, Buffer.concat([encodeVarInt(0x05), Buffer.alloc(400, 7)])), /inflates to more than the 300 bytes it claims/],
      ["Small", compressed(10, Buffer.alloc(300, 1)), /claims 10 bytes, below the threshold of 256/]
    ]
    for (const [name, bytes, logLine] of cases) {
      const client = connectClient(portal.port, { version: "1.20.4", username: name, host: "off.example" })
      expect((await client.joined)._tag).toBe("Joined")
      client.raw.socket.write(bytes)
      expect(await client.ended).toMatch(/sent a packet the proxy could not read/)
      await portal.waitForLog(logLine)
    }
    await keepsPlaying(bystander)
    expect(backend.clients.has("Bystander")).toBe(true)
  })

  it("a backend's compressed packets that claim less than the threshold reach the player, as a vanilla client takes them", { timeout: 20_000 }, async () => {
    const { backend, portal } = await startOffline()
    const player = connectClient(portal.port, { version: "1.20.4", username: "Small", host: "off.example" })
    expect((await player.joined)._tag).toBe("Joined")
    // The backend compresses every packet from now on, however small (its threshold with the proxy stays 256).
    const onBackend = backend.clients.get("Small")!
    ;(onBackend as unknown as { compressor: { compressionThreshold: number } }).compressor.compressionThreshold = 0
    serverChat(onBackend, "small and compressed")
    await waitFor(() => (player.chat.includes("small and compressed") ? true : undefined), { what: "the compressed chat line" })
    await keepsPlaying(player)
    expect(portal.logs.filter((line) => /could not read/.test(line))).toEqual([])
  })

  it("a player that stops reading is ended after [timeouts].write as a player timeout, its backend not blamed", { timeout: 20_000 }, async () => {
    const { backend, portal } = await startOffline(`[timeouts]\nread = "1s"\nwrite = "2s"`)
    const player = connectClient(portal.port, { version: "1.20.4", username: "Frozen", host: "off.example" })
    expect((await player.joined)._tag).toBe("Joined")
    const onBackend = backend.clients.get("Frozen")!
    const socket = (onBackend as unknown as { socket: import("node:net").Socket }).socket
    // The backend has much to say, as fast as it is taken; the player's client takes nothing from now on.
    const flood = setInterval(() => {
      if (socket.writable && !socket.writableNeedDrain) serverChat(onBackend, randomBytes(22_000).toString("base64"))
    }, 5)
    player.raw.socket.pause()
    try {
      const line = await portal.waitForLog(/Frozen .*left off /, 10_000)
      expect(line).toMatch(/\(player timeout/)
      expect(portal.logs.filter((text) => text.includes("the backend sent nothing for too long"))).toEqual([])
    } finally {
      clearInterval(flood)
    }
  })
})
