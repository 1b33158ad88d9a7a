/**
 * Abuse control on a running proxy: rate limits, IP filters and flood bounds. Client addresses are varied with
 * PROXY headers, so many IPs can be tested from one machine.
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { readdirSync } from "node:fs"
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { MAX_PENDING_HANDSHAKES, RateLimiter } from "../../src/services/RateLimiter.js"
import { HANDSHAKE_TIMEOUT_MS } from "../../src/services/session/opening.js"
import { BURST } from "../../src/services/log/refusalLines.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { waitFor } from "../helpers/wait.js"
import { join, ping, reasonText, startBackend } from "../peers/minecraft.js"
import { exchange, legacyKickText, ping16 } from "../peers/raw.js"

const from = (ip: string) =>
  Buffer.from(`PROXY ${ip.includes(":") ? "TCP6" : "TCP4"} ${ip} ${ip.includes(":") ? "::1" : "127.0.0.1"} 40000 25565\r\n`)

const setup = async (global: string, server = "") => {
  const backend = await startBackend("main")
  const dir = makeConfigDir(`bind = "127.0.0.1:0"\nreceive_proxy_protocol = true\n${global}`, {
    "main.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\n${server}`
  })
  const portal = await startPortal(dir.configFile)
  return { backend, portal, dir }
}

describe("[rate_limit]", () => {
  it("limits logins per IP per window with a message, separately for each address", async () => {
    const { portal, backend } = await setup(`[rate_limit]\nenabled = true\nmax_connections = 2\nwindow = "1m"`)
    const attempt = (ip: string) => join(portal.port, "mc.example.com", { preamble: from(ip) })
    expect(await attempt("203.0.113.1")).toEqual({ _tag: "Kicked", reason: "kick: main" })
    expect(await attempt("203.0.113.1")).toEqual({ _tag: "Kicked", reason: "kick: main" })
    const third = await attempt("203.0.113.1")
    expect(third._tag === "Kicked" && third.reason).toMatch(/Too many connection attempts/)
    expect(await attempt("203.0.113.2")).toEqual({ _tag: "Kicked", reason: "kick: main" })
    expect(backend.logins).toBe(3)
    // Pings are counted separately.
    expect(reasonText((await ping(portal.port, "mc.example.com", "1.20.4", from("203.0.113.1"))).description)).toBe("motd of main")
  })

  it("closes pings over the limit without contacting a backend", async () => {
    const { portal, backend } = await setup(`[rate_limit]\nenabled = true\nstatus_max = 3\nstatus_window = "1m"\n[status_cache]\nttl = "1ms"`)
    const results: Array<string> = []
    for (let i = 0; i < 5; i++) {
      results.push(await ping(portal.port, "mc.example.com", "1.20.4", from("198.51.100.5")).then(() => "ok", () => "closed"))
    }
    expect(results).toEqual(["ok", "ok", "ok", "closed", "closed"])
    expect(backend.handshakes).toHaveLength(3)
  })
  it("a flood of logins over the limit is a burst of info lines and a count, not a line per attempt", async () => {
    // One thread: its debug lines reach the captured log (a worker's are filtered there by default).
    const { portal, backend } = await setup(`worker_threads = 1\n[rate_limit]\nenabled = true\nmax_connections = 1\nwindow = "1m"`)
    // A login handshake for mc.example.com, then a FIN: no Login Start.
    const login = Buffer.concat([from("203.0.113.3"), Buffer.from("1500fe050e6d632e6578616d706c652e636f6d63dd02", "hex")])
    for (let i = 0; i < 40; i++) await exchange(portal.port, [login], { end: true })
    const refusals = portal.logs.filter((line) => line.includes("login over [rate_limit] refused"))
    // Every refusal is still logged, past the burst at debug level.
    expect(refusals).toHaveLength(39)
    expect(refusals.filter((line) => !line.startsWith("DEBUG"))).toHaveLength(BURST)
    expect(backend.handshakes).toHaveLength(0)
  })
})

describe("[ip_filter]", () => {
  it("the global filter refuses logins with a message and closes pings, before any backend", async () => {
    const { portal, backend } = await setup(`[ip_filter]\nblacklist = ["203.0.113.0/24", "2001:db8:bad::/48"]`)
    const refused = await join(portal.port, "mc.example.com", { preamble: from("203.0.113.50") })
    expect(refused._tag === "Kicked" && refused.reason).toMatch(/not allowed to connect/)
    await expect(ping(portal.port, "mc.example.com", "1.20.4", from("2001:db8:bad::1"))).rejects.toThrow()
    expect(backend.handshakes).toHaveLength(0)
    expect(await join(portal.port, "mc.example.com", { preamble: from("198.51.100.1") })).toEqual({ _tag: "Kicked", reason: "kick: main" })
    // The refused login is an info line; the refused ping is not (a debug one: pings can come without end).
    const refusals = portal.logs.filter((line) => line.includes("refused by the global [ip_filter]")).map((line) => line.split(" ")[0])
    expect(refusals.filter((level) => level !== "DEBUG")).toEqual(["INFO"])
  })

  it("a server's filter applies after routing, on top of the global one", async () => {
    const { portal } = await setup("", `[ip_filter]\nwhitelist = ["10.0.0.0/8"]\nblacklist = ["10.6.6.0/24"]`)
    const result = (ip: string) => join(portal.port, "mc.example.com", { preamble: from(ip) }).then((r) => (r._tag === "Kicked" ? r.reason : r._tag))
    expect(await result("10.1.2.3")).toBe("kick: main")
    expect(await result("10.6.6.6")).toMatch(/not allowed/)
    expect(await result("192.0.2.1")).toMatch(/not allowed/)
  })

  it("a server's filter closes a 1.6 legacy ping routed to it, before its backend is asked", async () => {
    const { portal, backend } = await setup("[status_cache]\nttl = \"1ms\"", `[ip_filter]\nblacklist = ["203.0.113.0/24"]`)
    const legacyPing = async (ip: string) => legacyKickText((await exchange(portal.port, [from(ip), ping16("mc.example.com", 25565)])).received)
    expect(await legacyPing("203.0.113.7")).toBeUndefined()
    expect(backend.handshakes).toHaveLength(0)
    expect((await legacyPing("198.51.100.7"))?.split("\0")[3]).toBe("motd of main")
    expect(backend.handshakes).toHaveLength(1)
  })

  it("filters follow hot reloads of server files and proxy.toml", async () => {
    const { portal, dir, backend } = await setup("")
    const result = () => join(portal.port, "mc.example.com", { preamble: from("192.0.2.99") }).then((r) => (r._tag === "Kicked" ? r.reason : r._tag))
    expect(await result()).toBe("kick: main")
    dir.write("servers/main.toml", `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\n[ip_filter]\nblacklist = ["192.0.2.99"]`)
    await waitFor(async () => ((await result()) !== "kick: main" ? true : undefined), { what: "server filter applied" })
    dir.write("servers/main.toml", `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`)
    await waitFor(async () => ((await result()) === "kick: main" ? true : undefined), { what: "server filter removed" })
    dir.write("proxy.toml", `bind = "127.0.0.1:0"\nreceive_proxy_protocol = true\n[ip_filter]\nwhitelist = ["10.0.0.0/8"]`)
    await portal.run(Effect.flatMap(ConfigStore, (store) => store.reloadGlobal))
    expect(await result()).toMatch(/not allowed/)
  })
})

describe("floods and hostile input", () => {
  it("a handshake flood from one address does not starve others", async () => {
    const { portal } = await setup("")
    // 40 connections from one address that send a PROXY header and then stall.
    const flood = Array.from({ length: 40 }, () => {
      const socket = net.connect(portal.port, "127.0.0.1")
      socket.on("error", () => {})
      socket.write(from("203.0.113.66"))
      return socket
    })
    const closedEarly = await Promise.all(
      flood.map((socket) => new Promise<boolean>((resolve) => {
        socket.once("close", () => resolve(true))
        setTimeout(() => resolve(false), 1500)
      }))
    )
    // Beyond the per-address bound the extra connections are closed at once.
    expect(closedEarly.filter(Boolean).length).toBeGreaterThanOrEqual(40 - 8)
    expect(await join(portal.port, "mc.example.com", { preamble: from("198.51.100.9") })).toEqual({ _tag: "Kicked", reason: "kick: main" })
    for (const socket of flood) socket.destroy()
  })

  it.each([1, 2])(
    "a flood from many addresses holding every handshake place: the oldest give way, and a real client is served (%i worker threads)",
    async (workers) => {
      const { portal } = await setup(`worker_threads = ${workers}`)
      const open = (n: number) => {
        const socket = net.connect(portal.port, "127.0.0.1")
        const openedAt = Date.now()
        let closedAt: number | undefined
        const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()))
        socket.once("close", () => (closedAt = Date.now()))
        socket.on("error", () => {})
        // Eight per address, within the per-address bound: only the proxy-wide one is reached.
        socket.write(from(`10.9.${n >> 3}.${(n & 7) + 1}`))
        return {
          socket,
          closed: () => socket.closed,
          whenClosed: closed,
          // Closed sooner than its handshake timeout could have closed it: it gave way to a newcomer. (On a loaded
          // machine the test may outlast the timeout, which then closes the newest too, as it should.)
          gaveWay: () => closedAt !== undefined && closedAt - openedAt < HANDSHAKE_TIMEOUT_MS
        }
      }
      const held = Array.from({ length: MAX_PENDING_HANDSHAKES }, (_, n) => open(n))
      const pending = () => portal.run(Effect.flatMap(RateLimiter, (limiter) => limiter.pendingHandshakes))
      await waitFor(async () => (await pending()) === MAX_PENDING_HANDSHAKES, { what: "every handshake place taken" })
      // Every place is taken; newcomers (a stalled flood connection, then real clients) get in, and the oldest leave.
      const late = Array.from({ length: 8 }, (_, n) => open(MAX_PENDING_HANDSHAKES + n))
      for (let i = 0; i < 3; i++) {
        expect(await join(portal.port, "mc.example.com", { preamble: from(`198.51.100.${i + 1}`) })).toEqual({ _tag: "Kicked", reason: "kick: main" })
        expect(reasonText((await ping(portal.port, "mc.example.com", "1.20.4", from(`198.51.100.${i + 50}`))).description)).toBe("motd of main")
      }
      await waitFor(() => held.filter((connection) => connection.closed()).length >= 8, { what: "eight of the oldest closed" })
      if (workers === 1) {
        // Those that gave way are the oldest, never the newest. (With workers each thread evicts its own oldest,
        // which are the oldest overall only as far as the kernel spread the connections evenly.)
        expect(held.slice(MAX_PENDING_HANDSHAKES / 2).filter((connection) => connection.gaveWay()).length).toBe(0)
        expect(late.filter((connection) => connection.gaveWay()).length).toBe(0)
      }
      expect(await pending()).toBeLessThanOrEqual(MAX_PENDING_HANDSHAKES)
      for (const connection of [...held, ...late]) connection.socket.destroy()
    },
    20_000
  )

  it("survives random and mutated handshakes, legacy pings and PROXY headers, then routes a real client with no leaked handles", async () => {
    const { portal } = await setup(`[rate_limit]\nenabled = false`)
    const seeds: Array<Buffer> = [
      Buffer.concat([from("192.0.2.1"), Buffer.from("1400fe050e6d632e6578616d706c652e636f6d63dd02", "hex")]),
      Buffer.concat([from("192.0.2.2"), Buffer.from("fe01fa000b004d0043007c00500069006e00670048006f00730074", "hex")]),
      Buffer.concat([Buffer.from("0d0a0d0a000d0a515549540a211100 0c c0000201 7f000001 9c40 63dd".replace(/ /g, ""), "hex"), Buffer.from("0f00bc02096c6f63616c686f737463dd01", "hex")]),
      Buffer.from("PROXY UNKNOWN\r\n")
    ]
    const mutate = (seed: Buffer): Buffer => {
      const out = Buffer.from(seed)
      const kind = Math.floor(Math.random() * 4)
      if (kind === 0) for (let i = 0; i < 3; i++) out[Math.floor(Math.random() * out.length)] = Math.floor(Math.random() * 256)
      if (kind === 1) return out.subarray(0, Math.floor(Math.random() * out.length))
      if (kind === 2) return Buffer.concat([out, randomBytes(Math.floor(Math.random() * 600))])
      if (kind === 3) return randomBytes(1 + Math.floor(Math.random() * 300))
      return out
    }
    const fdsBefore = readdirSync("/proc/self/fd").length
    const deadline = Date.now() + 4000
    let sent = 0
    while (Date.now() < deadline) {
      await Promise.all(
        Array.from({ length: 20 }, () => exchange(portal.port, [mutate(seeds[Math.floor(Math.random() * seeds.length)]!)], { timeoutMs: 300, end: Math.random() < 0.5 }))
      )
      sent += 20
    }
    expect(sent).toBeGreaterThan(100)
    expect(await join(portal.port, "mc.example.com", { preamble: from("198.51.100.10") })).toEqual({ _tag: "Kicked", reason: "kick: main" })
    // Connections the proxy left waiting for more bytes end at their handshake timeout.
    await waitFor(() => (readdirSync("/proc/self/fd").length <= fdsBefore + 4 ? true : undefined), {
      timeoutMs: 8000,
      what: `open descriptors back to about ${fdsBefore}`
    })
    expect(portal.logs.some((line) => line.startsWith("ERROR"))).toBe(false)
  }, 30_000)
})
