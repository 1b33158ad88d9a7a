/** Backends: failures, the status cache, balancing, limits, handshake rewriting and forwarding. */
import { spawn } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"
import { offlineUuid } from "../../src/protocol/forwarding.js"
import { freePort } from "../helpers/net.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { waitFor } from "../helpers/wait.js"
import { join, ping, reasonText, startBackend } from "../peers/minecraft.js"

const proxyToml = (extra = "") => `bind = "127.0.0.1:0"\nconnect_timeout = "1s"\n${extra}`


/** A backend address whose connects hang (the stuckListener peer with its accept queue filled), for `holdMs`. */
const hangingBackend = async (holdMs: number) => {
  const child = spawn(process.execPath, [path.resolve("test/peers/stuckListener.mjs"), String(holdMs)], { stdio: ["ignore", "pipe", "inherit"] })
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      const found = /ready (\d+)/.exec(String(chunk))
      if (found !== null) resolve(Number(found[1]))
    })
    child.once("exit", () => reject(new Error("the stuck listener ended early")))
  })
  await new Promise((resolve) => setTimeout(resolve, 200))
  const fillers = [0, 1].map(() => net.connect(port, "127.0.0.1").on("error", () => {}))
  await new Promise((resolve) => setTimeout(resolve, 100))
  return {
    port,
    close: () => {
      for (const filler of fillers) filler.destroy()
      child.kill()
    }
  }
}

describe("backend down", () => {
  it.each([1, 2])("in a packet mode, a player who leaves while a hanging backend is dialled gives the place back at once (worker_threads = %i)", { timeout: 20_000 }, async (workers) => {
    const hanging = await hangingBackend(15_000)
    try {
      const dir = makeConfigDir(proxyToml(`connect_timeout = "10s"\nworker_threads = ${workers}`).replace(`connect_timeout = "1s"\n`, ""), {
        "slow.toml": `domains = ["slow.example.com"]\naddresses = ["127.0.0.1:${hanging.port}"]\nmax_players = 1\nproxy_mode = "offline"`
      })
      const portal = await startPortal(dir.configFile, { workerLogLevel: "debug" })
      const countOnline = () =>
        portal.run(
          Effect.gen(function* () {
            const server = (yield* (yield* ConfigStore).get).servers.get("slow")!
            return (yield* PlayerRegistry).dataPlane.countFor(server)
          })
        )
      // The player gives up after a second (the client closes its connection); the dial would go on for 10 s.
      const started = Date.now()
      await expect(join(portal.port, "slow.example.com", { timeoutMs: 1_000 })).rejects.toThrow(/did not finish in time/)
      await portal.waitForLog(/Steve.* left while slow was dialled/, 3_000)
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(await countOnline()).toBe(0)
      expect(portal.logs.filter((line) => /could not join/.test(line))).toEqual([])
    } finally {
      hanging.close()
    }
  })

  it("a login gets disconnect_message and a ping the unreachable MOTD", async () => {
    const port = await freePort()
    const dir = makeConfigDir(proxyToml(), {
      "down.toml": [
        `domains = ["down.example.com"]`,
        `addresses = ["127.0.0.1:${port}"]`,
        `disconnect_message = "Back soon!"`,
        `[motd.unreachable]\ntext = "§cDown for maintenance"`
      ].join("\n")
    })
    const portal = await startPortal(dir.configFile)
    expect(await join(portal.port, "down.example.com")).toEqual({ _tag: "Kicked", reason: "Back soon!" })
    expect(reasonText((await ping(portal.port, "down.example.com")).description)).toBe("§cDown for maintenance")
    await portal.waitForLog(/Steve.* could not join down: no address of server down answered: 127\.0\.0\.1:\d+ \(ECONNREFUSED\)/)
  })

  it("the built-in unreachable text and the default disconnect_message apply when none is configured", async () => {
    const port = await freePort()
    const dir = makeConfigDir(proxyToml(), { "down.toml": `domains = ["down.example.com"]\naddresses = ["127.0.0.1:${port}"]` })
    const portal = await startPortal(dir.configFile)
    expect(reasonText((await ping(portal.port, "down.example.com")).description)).toMatch(/cannot be reached/)
    expect(await join(portal.port, "down.example.com")).toEqual({
      _tag: "Kicked",
      reason: "Server is currently unreachable. Please try again later."
    })
  })

  it("a stale cached answer is served when the backend goes away", async () => {
    const backend = await startBackend("cached")
    const dir = makeConfigDir(proxyToml(`[status_cache]\nttl = "200ms"`), {
      "c.toml": `domains = ["c.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    expect(reasonText((await ping(portal.port, "c.example.com")).description)).toBe("motd of cached")
    await backend.close()
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(reasonText((await ping(portal.port, "c.example.com")).description)).toBe("motd of cached")
  })

  it("within the ttl pings are answered from the cache without touching the backend", async () => {
    const backend = await startBackend("counted")
    const dir = makeConfigDir(proxyToml(`[status_cache]\nttl = "1m"`), {
      "c.toml": `domains = ["c.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    // Four at once: with the one after them, well within the eight handshakes in progress one address may have (a
    // ping's place is given back as its connection closes, which may come after the client has its answer).
    await Promise.all(Array.from({ length: 4 }, () => ping(portal.port, "c.example.com")))
    await ping(portal.port, "c.example.com")
    // Concurrent misses share one backend request; later pings hit the cache.
    expect(backend.handshakes.filter((h) => h.host === "c.example.com")).toHaveLength(1)
    // Another protocol version is another cache entry.
    await ping(portal.port, "c.example.com", "1.8.8")
    expect(backend.handshakes).toHaveLength(2)
  })

  it("[motd.online] overrides fields of the live answer; the counts stay live", async () => {
    const backend = await startBackend("live")
    const dir = makeConfigDir(proxyToml(), {
      "l.toml": [
        `domains = ["l.example.com"]`,
        `addresses = ["127.0.0.1:${backend.port}"]`,
        `[motd.online]\ntext = "§aOverridden"\nversion_name = "Portal 1.21"\nmax_players = 500`
      ].join("\n")
    })
    const portal = await startPortal(dir.configFile)
    const answer = await ping(portal.port, "l.example.com")
    expect(answer.description).toBe("§aOverridden")
    expect(answer.version).toEqual({ name: "Portal 1.21", protocol: 765 })
    expect(answer.players).toMatchObject({ max: 500, online: 0 })
  })
})

describe("balancing", () => {
  const backendsOf = async (names: Array<string>, hold = false) => Promise.all(names.map((name) => startBackend(name, { hold })))

  it("first_available uses the first address that answers, in order", async () => {
    const down = await freePort()
    const [a, b] = await backendsOf(["a", "b"])
    const dir = makeConfigDir(proxyToml(), {
      "s.toml": `domains = ["s.example.com"]\naddresses = ["127.0.0.1:${down}", "127.0.0.1:${a!.port}", "127.0.0.1:${b!.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    for (let i = 0; i < 3; i++) expect(await join(portal.port, "s.example.com")).toEqual({ _tag: "Kicked", reason: "kick: a" })
    expect(b!.logins).toBe(0)
  })

  it("round_robin spreads logins by weight", async () => {
    const [a, b] = await backendsOf(["a", "b"])
    const dir = makeConfigDir(proxyToml(), {
      "s.toml": [
        `domains = ["s.example.com"]`,
        `balance = "round_robin"`,
        `addresses = [{ address = "127.0.0.1:${a!.port}", weight = 1 }, { address = "127.0.0.1:${b!.port}", weight = 2 }]`
      ].join("\n")
    })
    const portal = await startPortal(dir.configFile)
    const reasons: Array<string> = []
    for (let i = 0; i < 6; i++) {
      const result = await join(portal.port, "s.example.com")
      reasons.push(result._tag === "Kicked" ? result.reason : result._tag)
    }
    expect(reasons).toEqual(["kick: b", "kick: a", "kick: b", "kick: b", "kick: a", "kick: b"])
  })

  it("least_conn sends a login to the address with the fewest live sessions per weight", async () => {
    const [a, b] = await backendsOf(["a", "b"], true)
    const dir = makeConfigDir(proxyToml(), {
      "s.toml": [
        `domains = ["s.example.com"]`,
        `balance = "least_conn"`,
        `addresses = ["127.0.0.1:${a!.port}", "127.0.0.1:${b!.port}"]`
      ].join("\n")
    })
    const portal = await startPortal(dir.configFile)
    const first = await join(portal.port, "s.example.com", { username: "p1" })
    expect(first._tag).toBe("Joined")
    const second = await join(portal.port, "s.example.com", { username: "p2" })
    expect(second._tag).toBe("Joined")
    expect([a!.players.size, b!.players.size]).toEqual([1, 1])
    if (first._tag === "Joined") first.leave()
    await waitFor(() => a!.players.size + b!.players.size === 1 || undefined)
    const emptier = a!.players.size === 0 ? a! : b!
    expect((await join(portal.port, "s.example.com", { username: "p3" }))._tag).toBe("Joined")
    expect(emptier.players.size).toBe(1)
  })

  it("least_conn counts a login from its connect on: eight logins at once split four and four", async () => {
    const [a, b] = await backendsOf(["a", "b"], true)
    const dir = makeConfigDir(proxyToml(), {
      "s.toml": [`domains = ["s.example.com"]`, `balance = "least_conn"`, `addresses = ["127.0.0.1:${a!.port}", "127.0.0.1:${b!.port}"]`].join("\n")
    })
    const portal = await startPortal(dir.configFile)
    // Eight: the handshakes one address may have in progress at once.
    const joins = await Promise.all(Array.from({ length: 8 }, (_, i) => join(portal.port, "s.example.com", { username: `burst${i}` })))
    expect(joins.map((result) => result._tag)).toEqual(Array.from({ length: 8 }, () => "Joined"))
    expect([a!.players.size, b!.players.size]).toEqual([4, 4])
  })

  it("connect_max_attempts bounds the addresses tried", async () => {
    const [down1, down2] = [await freePort(), await freePort()]
    const a = await startBackend("a")
    const dir = makeConfigDir(proxyToml(`connect_max_attempts = 2`), {
      "s.toml": `domains = ["s.example.com"]\naddresses = ["127.0.0.1:${down1}", "127.0.0.1:${down2}", "127.0.0.1:${a.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    expect(await join(portal.port, "s.example.com")).toEqual({ _tag: "Kicked", reason: "Server is currently unreachable. Please try again later." })
    // The two failed addresses are now ejected and tried last: the third answers.
    expect(await join(portal.port, "s.example.com")).toEqual({ _tag: "Kicked", reason: "kick: a" })
  })
})

describe("limits and rewriting", () => {
  it("max_players: a login over the limit is told the server is full", async () => {
    const backend = await startBackend("small", { hold: true })
    const dir = makeConfigDir(proxyToml(), {
      "s.toml": `domains = ["s.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\nmax_players = 1`
    })
    const portal = await startPortal(dir.configFile)
    expect((await join(portal.port, "s.example.com", { username: "first" }))._tag).toBe("Joined")
    const second = await join(portal.port, "s.example.com", { username: "second" })
    expect(second._tag === "Kicked" && second.reason).toMatch(/The server is full/)
    // Portal composes no answer for an online server, but the registry counts are what max_players checks.
    expect(backend.players.size).toBe(1)
  })

  it.each([
    ["modern forwarding in passthrough", `forwarding_mode = "modern"`, /player forwarding is misconfigured/, /refused Steve.*: modern forwarding needs a packet proxy mode/]
  ])("%s: a login is refused with its reason, and the backend never sees it", async (_, line, reason, logLine) => {
    const backend = await startBackend("x")
    const dir = makeConfigDir(proxyToml(), { "x.toml": `domains = ["x.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\n${line}` })
    const portal = await startPortal(dir.configFile)
    const refused = await join(portal.port, "x.example.com")
    expect(refused._tag === "Kicked" && refused.reason).toMatch(reason)
    expect(backend.handshakes).toHaveLength(0)
    await portal.waitForLog(logLine)
  })

  it.each([
    ["none", `domain_rewrite = "none"`, () => ({ host: "play.example.com" })],
    ["from_backend", `domain_rewrite = "from_backend"`, (port: number) => ({ host: "127.0.0.1", port })],
    ["explicit", `domain_rewrite = { explicit = "internal.lan" }`, (port: number) => ({ host: "internal.lan", port })]
  ])("domain_rewrite %s", async (_, line, expected) => {
    const backend = await startBackend("r")
    const dir = makeConfigDir(proxyToml(), {
      "r.toml": `domains = ["play.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\n${line}`
    })
    const portal = await startPortal(dir.configFile)
    await join(portal.port, "play.example.com")
    expect(backend.handshakes.at(-1)).toMatchObject(expected(backend.port))
  })

  it("legacy forwarding: the backend sees host, the real client IP and the UUID", async () => {
    const backend = await startBackend("bungee")
    const dir = makeConfigDir(proxyToml(), {
      "b.toml": `domains = ["b.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\nforwarding_mode = "legacy"`
    })
    const portal = await startPortal(dir.configFile)
    await join(portal.port, "b.example.com", { version: "1.12.2", username: "Alex" })
    const [host, ip, uuid, properties] = backend.handshakes.at(-1)!.host.split("\0")
    expect([host, ip, uuid, properties]).toEqual(["b.example.com", "127.0.0.1", offlineUuid("Alex").replace(/-/g, ""), undefined])
    // A 1.20.4 client sends its UUID in Login Start; that one is forwarded.
    await join(portal.port, "b.example.com", { version: "1.20.4", username: "Alex" })
    expect(backend.handshakes.at(-1)!.host.split("\0")[2]).toMatch(/^[0-9a-f]{32}$/)
    // A client that found the server through an SRV record writes the target with its trailing dot: the backend
    // sees the host without it (the case as the player wrote it), as BungeeCord and Velocity forward it.
    await join(portal.port, "B.Example.com.", { version: "1.12.2", username: "Alex" })
    expect(backend.handshakes.at(-1)!.host.split("\0")[0]).toBe("B.Example.com")
  })

  it("legacy forwarding of a 1.7-1.12 Forge client: the marker it drops is told in forgeClient and extraData", async () => {
    const backend = await startBackend("forge")
    const dir = makeConfigDir(proxyToml(), {
      "f.toml": `domains = ["f.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\nforwarding_mode = "legacy"`
    })
    const portal = await startPortal(dir.configFile)
    await join(portal.port, "f.example.com\0FML\0", { version: "1.12.2", username: "Modded" })
    const fields = backend.handshakes.at(-1)!.host.split("\0")
    expect(fields.slice(0, 3)).toEqual(["f.example.com", "127.0.0.1", offlineUuid("Modded").replace(/-/g, "")])
    expect(JSON.parse(fields[3]!)).toEqual([
      { name: "forgeClient", value: "true" },
      { name: "extraData", value: "\u0001FML\u0001", signature: "" }
    ])
  })

  it("legacy_guard forwarding carries the secret as a bungeeguard-token property", async () => {
    const backend = await startBackend("guard")
    const dir = makeConfigDir(proxyToml(`[forwarding]\nmode = "legacy_guard"`), {
      "g.toml": `domains = ["g.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    await join(portal.port, "g.example.com", { version: "1.12.2" })
    const secret = readFileSync(path.join(dir.root, "forwarding.secret"), "utf8").trim()
    const fields = backend.handshakes.at(-1)!.host.split("\0")
    expect(JSON.parse(fields[3]!)).toEqual([{ name: "bungeeguard-token", value: secret, signature: "" }])
  })

  it("legacy_guard forwarding with an empty secret file: the player is told, the backend never sees the login", async () => {
    const backend = await startBackend("guard")
    const dir = makeConfigDir(proxyToml(`[forwarding]\nmode = "legacy_guard"`), {
      "g.toml": `domains = ["g.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    writeFileSync(path.join(dir.root, "forwarding.secret"), "")
    const refused = await join(portal.port, "g.example.com", { version: "1.12.2" })
    expect(refused._tag === "Kicked" && refused.reason).toMatch(/player forwarding is misconfigured/)
    expect(backend.handshakes).toHaveLength(0)
    await portal.waitForLog(/Steve.* could not join g: the forwarding secret .*forwarding\.secret is empty/)
  })
})
