/** Legacy clients, PROXY protocol in and out, and bad input: the proxy answers what it can and keeps serving. */
import { execFileSync, spawn } from "node:child_process"
import { createRequire } from "node:module"
import * as net from "node:net"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { freePort } from "../helpers/net.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { waitFor } from "../helpers/wait.js"
import { join, ping, reasonText, startBackend } from "../peers/minecraft.js"
import { exchange, legacyKickText, ping16, recordingBackend, utf16be } from "../peers/raw.js"

const hex = (text: string) => Buffer.from(text.replace(/\s+/g, ""), "hex")

const mc = createRequire(import.meta.url)("minecraft-protocol")
/** A real handshake + Login Start, serialised by minecraft-protocol. */
const loginBytes = (host: string, name = "Steve") => {
  const handshake = mc.createSerializer({ state: "handshaking", isServer: false, version: "1.12.2" }).createPacketBuffer({
    name: "set_protocol",
    params: { protocolVersion: 340, serverHost: host, serverPort: 25565, nextState: 2 }
  })
  const login = mc.createSerializer({ state: "login", isServer: false, version: "1.12.2" }).createPacketBuffer({
    name: "login_start",
    params: { username: name }
  })
  const frame = (packet: Buffer) => Buffer.concat([Buffer.from([packet.length]), packet])
  return Buffer.concat([frame(handshake), frame(login)])
}

const setup = async (extra = "", serverExtra = "") => {
  const backend = await startBackend("main")
  const dir = makeConfigDir(`bind = "127.0.0.1:0"\n${extra}`, {
    "main.toml": `domains = ["localhost", "mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\n${serverExtra}`
  })
  const portal = await startPortal(dir.configFile)
  return { backend, portal, dir }
}

describe("legacy clients", () => {
  it("answers beta, 1.4-1.5 and 1.6 pings in the legacy kick format, the 1.6 one routed by its host", async () => {
    const { portal } = await setup()
    const beta = legacyKickText((await exchange(portal.port, [hex("fe")])).received)
    expect(beta).toMatch(/^[^§]*§0§0$/) // unknown host: default MOTD, no formatting codes
    const v14 = legacyKickText((await exchange(portal.port, [hex("fe01")])).received)
    expect(v14?.split("\0")[0]).toBe("§1")
    const v16 = legacyKickText((await exchange(portal.port, [ping16("mc.example.com", 25565)])).received)
    expect(v16?.split("\0")).toEqual(["§1", expect.any(String), expect.any(String), "motd of main", "0", "42"])
  })

  it("a 1.6 ping split across packets is still understood", async () => {
    const { portal } = await setup()
    const bytes = ping16("mc.example.com", 25565)
    // FE alone looks like a beta ping and FE 01 like a 1.4 one, until the rest arrives.
    const answer = await exchange(portal.port, [bytes.subarray(0, 1), bytes.subarray(1, 2), bytes.subarray(2, 9), bytes.subarray(9)], { gapMs: 100 })
    expect(legacyKickText(answer.received)?.split("\0")[3]).toBe("motd of main")
    // Its rest coming after the short wait for a lone FE 01 (300 ms): once FA has come (at 150 ms, a margin for a
    // loaded machine), it is a 1.6 ping, with a handshake's time for the rest (the last piece at 450 ms).
    const slow = await exchange(portal.port, [bytes.subarray(0, 2), bytes.subarray(2, 12), bytes.subarray(12, 13), bytes.subarray(13)], { gapMs: 150 })
    expect(legacyKickText(slow.received)?.split("\0")[3]).toBe("motd of main")
  })

  it("a pre-1.7 login gets a legacy kick message", async () => {
    const { portal } = await setup()
    const login = Buffer.concat([hex("02 4e 0005"), utf16be("Steve"), hex("0009"), utf16be("localhost"), hex("000063dd")])
    expect(legacyKickText((await exchange(portal.port, [login])).received)).toMatch(/needs Minecraft 1\.7 or newer/)
  })
})

describe("PROXY protocol in", () => {
  const v2Header = (source: string, port: number) => {
    const header = Buffer.concat([hex("0d0a0d0a000d0a515549540a 21 11 000c"), Buffer.from(source.split(".").map(Number)), hex("7f000001"), Buffer.alloc(4)])
    header.writeUInt16BE(port, 24)
    header.writeUInt16BE(25565, 26)
    return header
  }

  it("takes the client address from v1 and v2 headers and forwards it", async () => {
    const { portal, backend } = await setup(`receive_proxy_protocol = true`, `forwarding_mode = "legacy"`)
    await join(portal.port, "mc.example.com", { preamble: Buffer.from("PROXY TCP4 203.0.113.9 127.0.0.1 50000 25565\r\n") })
    expect(backend.handshakes.at(-1)!.host.split("\0")[1]).toBe("203.0.113.9")
    await join(portal.port, "mc.example.com", { preamble: v2Header("198.51.100.77", 40000) })
    expect(backend.handshakes.at(-1)!.host.split("\0")[1]).toBe("198.51.100.77")
    // The connection's log fields: its number, the address from the header, the server it was routed to.
    await portal.waitForLog(/joined main .* conn=\d+ ip=198\.51\.100\.77 server=main( worker=\d+)?$/)
    // Status pings go through the header too.
    expect(reasonText((await ping(portal.port, "mc.example.com", "1.20.4", Buffer.from("PROXY TCP6 2001:db8::1 ::1 1 2\r\n"))).description)).toBe("motd of main")
  })

  it("closes a connection without a valid header", async () => {
    const { portal, backend } = await setup(`receive_proxy_protocol = true`)
    const answer = await exchange(portal.port, [loginBytes("mc.example.com")])
    expect(answer).toEqual({ received: Buffer.alloc(0), closed: true })
    expect(backend.logins).toBe(0)
  })

  it("without receive_proxy_protocol a PROXY header is just bad input", async () => {
    const { portal, backend } = await setup()
    const answer = await exchange(portal.port, [Buffer.from("PROXY TCP4 203.0.113.9 127.0.0.1 50000 25565\r\n"), loginBytes("mc.example.com")])
    expect(answer.closed).toBe(true)
    expect(backend.logins).toBe(0)
  })

  const haproxy = (() => {
    try {
      execFileSync("haproxy", ["-v"], { stdio: "ignore" })
      return true
    } catch {
      return false
    }
  })()

  it.skipIf(!haproxy)("works behind a real HAProxy sending send-proxy and send-proxy-v2", async () => {
    const { portal, backend, dir } = await setup(`receive_proxy_protocol = true`, `forwarding_mode = "legacy"`)
    for (const option of ["send-proxy", "send-proxy-v2"]) {
      const port = await freePort("127.0.0.2")
      const config = path.join(dir.root, `haproxy-${option}.cfg`)
      dir.write(
        path.basename(config),
        `defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n` +
          `frontend f\n  bind 127.0.0.2:${port}\n  default_backend b\nbackend b\n  server portal 127.0.0.1:${portal.port} ${option}\n`
      )
      const child = spawn("haproxy", ["-f", config, "-db"], { stdio: "ignore" })
      try {
        await waitFor(() =>
          new Promise<boolean | undefined>((resolve) => {
            const probe = net.connect(port, "127.0.0.2", () => (probe.destroy(), resolve(true)))
            probe.on("error", () => resolve(undefined))
          })
        )
        const result = await join(port, "mc.example.com", { address: "127.0.0.2", localAddress: "127.0.0.3" })
        expect(result).toEqual({ _tag: "Kicked", reason: "kick: main" })
        // Portal's TCP peer is HAProxy (127.0.0.1); the client address comes from HAProxy's header.
        expect(backend.handshakes.at(-1)!.host.split("\0")[1]).toBe("127.0.0.3")
        await portal.waitForLog(/joined main .*ip=127\.0\.0\.3/)
      } finally {
        child.kill("SIGKILL")
      }
    }
  })
})

describe("PROXY protocol out", () => {
  it("send_proxy_protocol writes a v2 header with the real client address before the handshake", async () => {
    const recorder = await recordingBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nreceive_proxy_protocol = true`, {
      "p.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${recorder.port}"]\nsend_proxy_protocol = true`
    })
    const portal = await startPortal(dir.configFile)
    const login = loginBytes("mc.example.com")
    await exchange(portal.port, [Buffer.from("PROXY TCP4 192.0.2.44 10.9.8.7 41234 25565\r\n"), login], { timeoutMs: 1500 })
    const seen = recorder.connections[0]!
    expect(seen.subarray(0, 12)).toEqual(hex("0d0a0d0a000d0a515549540a"))
    expect(seen[12]).toBe(0x21) // v2, PROXY
    expect(seen[13]).toBe(0x11) // TCP over IPv4
    expect(seen.readUInt16BE(14)).toBe(12)
    expect([...seen.subarray(16, 20)]).toEqual([192, 0, 2, 44])
    expect([...seen.subarray(20, 24)]).toEqual([10, 9, 8, 7])
    expect(seen.readUInt16BE(24)).toBe(41234)
    expect(seen.readUInt16BE(26)).toBe(25565)
    // Then the handshake and Login Start exactly as the client sent them.
    expect(seen.subarray(28)).toEqual(login)
  })
})

describe("bad input", () => {
  const cases: Array<[string, Array<Buffer>]> = [
    ["random bytes", [Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n")]],
    ["a VarInt longer than 5 bytes", [hex("ffffffffff01")]],
    ["a frame length over the handshake limit", [hex("ffff03")]],
    ["an empty frame", [hex("00")]],
    ["a frame of 254 bytes that is not a handshake", [Buffer.concat([hex("fe01 05"), Buffer.alloc(20)])]],
    ["an address longer than allowed", [Buffer.concat([hex("ff 3f 00 81 06 ff 3e"), Buffer.alloc(8063, 0x61)])]],
    ["a handshake with an unknown next state", [hex("0700 2f 01 61 63dd 09")]],
    ["a non-handshake packet first", [hex("0201 00")]],
    ["a garbage Login Start", [hex("0f00 bc02 09 6c6f63616c686f7374 63dd 02"), hex("05 00 ff ff ff ff")]],
    ["a status request that is not one", [hex("0f00 bc02 09 6c6f63616c686f7374 63dd 01"), hex("03 05 01 02")]],
  ]

  it.each(cases)("%s: closed, and the proxy keeps serving", async (_, chunks) => {
    const { portal, backend } = await setup()
    const answer = await exchange(portal.port, chunks, { timeoutMs: 6000 })
    expect(answer.closed).toBe(true)
    expect(backend.logins).toBe(0)
    expect(reasonText((await ping(portal.port, "mc.example.com")).description)).toBe("motd of main")
  })

  it("a truncated handshake followed by a close is cleaned up at once", async () => {
    const { portal } = await setup()
    const answer = await exchange(portal.port, [hex("15 00 81 06 0e 6d 63")], { end: true, timeoutMs: 2000 })
    expect(answer.closed).toBe(true)
    expect(reasonText((await ping(portal.port, "mc.example.com")).description)).toBe("motd of main")
  })

  it("a modern handshake of exactly 254 bytes (it starts FE 01 like a legacy ping) is a handshake", async () => {
    const recorder = await recordingBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, { "r.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${recorder.port}"]` })
    const portal = await startPortal(dir.configFile)
    const handshake = (host: string, nextState: number) => {
      const address = Buffer.concat([Buffer.from(`${host}\0`), Buffer.alloc(245 - host.length, 0x78)])
      const body = Buffer.concat([hex("00 d402 f601"), address, hex("63dd"), Buffer.from([nextState])])
      expect(body.length).toBe(254)
      return { frame: Buffer.concat([hex("fe01"), body]), body }
    }
    // A status ping for an unknown domain: answered by Portal with a status response, not a legacy kick.
    const status = await exchange(portal.port, [handshake("nowhere.example.com", 1).frame, hex("0100")], { timeoutMs: 2000 })
    expect(status.received[0]).not.toBe(0xff)
    expect(status.received.toString("utf8")).toContain("No server answers to this address")
    // A login: routed, and handed to the backend with the length written so no backend mistakes it either.
    const login = handshake("mc.example.com", 2)
    const start = hex("0700 05 5374657665")
    await exchange(portal.port, [login.frame, start], { timeoutMs: 1000 })
    expect(recorder.connections[0]).toEqual(Buffer.concat([hex("fe8100"), login.body, start]))
  })

  it("a handshake nothing changes reaches the backend byte for byte; a rewritten one is encoded afresh", async () => {
    const recorder = await recordingBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, {
      "same.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${recorder.port}"]`,
      "rewritten.toml": `domains = ["other.example.com"]\naddresses = ["127.0.0.1:${recorder.port}"]\ndomain_rewrite = { explicit = "inner.local" }`
    })
    const portal = await startPortal(dir.configFile)
    // Protocol 340 (1.12.2) written in three bytes (d4 82 00) where two would do: valid, but not how Portal writes it.
    const handshake = (host: string) => {
      const body = Buffer.concat([hex("00 d48200"), Buffer.from([host.length]), Buffer.from(host), hex("63dd 02")])
      return Buffer.concat([Buffer.from([body.length]), body])
    }
    const start = hex("0700 05 5374657665")
    await exchange(portal.port, [handshake("mc.example.com"), start], { timeoutMs: 1000 })
    expect(recorder.connections[0]).toEqual(Buffer.concat([handshake("mc.example.com"), start]))
    await exchange(portal.port, [handshake("other.example.com"), start], { timeoutMs: 1000 })
    const port = Buffer.alloc(2)
    port.writeUInt16BE(recorder.port)
    const body = Buffer.concat([hex("00 d402"), Buffer.from([11]), Buffer.from("inner.local"), port, hex("02")])
    const rewritten = Buffer.concat([Buffer.from([body.length]), body])
    expect(recorder.connections[1]).toEqual(Buffer.concat([rewritten, start]))
  })

  it("a handshake that never completes is closed after the handshake timeout", async () => {
    const { portal } = await setup()
    const started = Date.now()
    const answer = await exchange(portal.port, [hex("15 00 81 06")], { timeoutMs: 9000 })
    expect(answer.closed).toBe(true)
    expect(Date.now() - started).toBeGreaterThan(4500)
    expect(Date.now() - started).toBeLessThan(8000)
  })

  it("max_connections closes connections over the cap at once", async () => {
    const { portal } = await setup(`max_connections = 2`)
    const held = [net.connect(portal.port, "127.0.0.1"), net.connect(portal.port, "127.0.0.1")]
    for (const socket of held) socket.on("error", () => {})
    await new Promise((resolve) => setTimeout(resolve, 200))
    const third = await exchange(portal.port, [], { timeoutMs: 2000 })
    expect(third.closed).toBe(true)
    for (const socket of held) socket.destroy()
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(reasonText((await ping(portal.port, "mc.example.com")).description)).toBe("motd of main")
  })

  it("a connection refused for the handshake bound gives its max_connections place back at once", async () => {
    const { portal } = await setup(`max_connections = 9`)
    // Eight silent connections from one address: all the handshakes in progress it may have.
    const held = Array.from({ length: 8 }, () => net.connect({ port: portal.port, host: "127.0.0.1", localAddress: "127.0.190.1" }))
    for (const socket of held) socket.on("error", () => {})
    await waitFor(() => held.every((socket) => !socket.connecting), { what: "eight connections" })
    await new Promise((resolve) => setTimeout(resolve, 100))
    // The ninth from that address is refused; its place must not stay taken after it is gone.
    const ninth = await exchange(portal.port, [], { timeoutMs: 2000, localAddress: "127.0.190.1" })
    expect(ninth.closed).toBe(true)
    // Another player, well within the flush timer of two seconds (the place comes back with the socket's close, a
    // moment after the peer sees it): the ninth place is free for them.
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(reasonText((await ping(portal.port, "mc.example.com")).description)).toBe("motd of main")
    for (const socket of held) socket.destroy()
  })
})

describe("shutdown with connections in their opening", () => {
  /** A status handshake for mc.example.com, cut in two: the first part leaves the connection in its opening. */
  const statusHandshake = hex("15 00 bc02 0e 6d632e6578616d706c652e636f6d 63dd 01")
  const withGrace = async <A>(ms: number, run: () => Promise<A>): Promise<A> => {
    const grace = process.env.PORTAL_SHUTDOWN_GRACE_MS
    process.env.PORTAL_SHUTDOWN_GRACE_MS = String(ms)
    try {
      return await run()
    } finally {
      process.env.PORTAL_SHUTDOWN_GRACE_MS = grace
    }
  }
  const open = async (port: number) => {
    const socket = net.connect(port, "127.0.0.1")
    socket.on("error", () => {})
    const received: Array<Buffer> = []
    socket.on("data", (chunk: Buffer) => received.push(chunk))
    const closed = new Promise<number>((resolve) => socket.once("close", () => resolve(Date.now())))
    await new Promise((resolve) => socket.once("connect", resolve))
    socket.write(statusHandshake.subarray(0, 6))
    return { socket, closed, received: () => Buffer.concat(received) }
  }

  for (const workers of [1, 2]) {
    it(`one that completes its handshake within the grace is answered (worker_threads = ${workers})`, async () => {
      const { portal } = await setup(`worker_threads = ${workers}`)
      const client = await open(portal.port)
      await new Promise((resolve) => setTimeout(resolve, 200))
      await withGrace(3000, async () => {
        const stopping = portal.stop()
        await new Promise((resolve) => setTimeout(resolve, 300))
        client.socket.write(Buffer.concat([statusHandshake.subarray(6), hex("0100")]))
        await client.closed
        await stopping
      })
      expect(client.received().toString("utf8")).toContain("motd of main")
    })

    it(`one still in its handshake when the grace is over is closed then, not at its handshake timeout (worker_threads = ${workers})`, async () => {
      const { portal } = await setup(`worker_threads = ${workers}`)
      const client = await open(portal.port)
      await new Promise((resolve) => setTimeout(resolve, 200))
      const started = Date.now()
      await withGrace(300, () => portal.stop())
      const closedAt = await client.closed
      expect(client.received().length).toBe(0)
      // The handshake timeout is 5 s; the grace 0.3 s.
      expect(closedAt - started).toBeLessThan(3000)
    })
  }
})
