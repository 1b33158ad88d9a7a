/** Routing by domain, status answers and logins, with minecraft-protocol clients and servers as the peers. */
import { describe, expect, it } from "vitest"
import { makeConfigDir } from "../helpers/tempdir.js"
import { waitFor } from "../helpers/wait.js"
import { startPortal } from "../helpers/portal.js"
import { CLIENT_VERSIONS, join, ping, reasonText, startBackend } from "../peers/minecraft.js"

const proxyToml = (extra = "") => `bind = "127.0.0.1:0"\n${extra}`

describe("routing by domain", () => {
  it.each(CLIENT_VERSIONS)("pings and logins reach the server of their domain (%s client)", async (version) => {
    const lobby = await startBackend("lobby")
    const survival = await startBackend("survival")
    const dir = makeConfigDir(proxyToml(), {
      "lobby.toml": `domains = ["lobby.example.com"]\naddresses = ["127.0.0.1:${lobby.port}"]`,
      "survival.toml": `domains = ["survival.example.com", "*.survival.example.com"]\naddresses = ["127.0.0.1:${survival.port}"]`
    })
    const portal = await startPortal(dir.configFile)

    expect(reasonText((await ping(portal.port, "lobby.example.com", version)).description)).toBe("motd of lobby")
    expect(reasonText((await ping(portal.port, "Deep.S1.Survival.Example.com.", version)).description)).toBe("motd of survival")
    expect(reasonText((await ping(portal.port, "survival.example.com", version)).description)).toBe("motd of survival")

    expect(await join(portal.port, "lobby.example.com", { version })).toEqual({ _tag: "Kicked", reason: "kick: lobby" })
    expect(await join(portal.port, "a.survival.example.com", { version })).toEqual({ _tag: "Kicked", reason: "kick: survival" })
    // The backend received the player's own address (domain_rewrite = "none").
    expect(survival.handshakes.at(-1)!.host).toBe("a.survival.example.com")
    await portal.waitForLog(/Steve.* joined survival via 127\.0\.0\.1:\d+/)
  })

  it("exact domains beat wildcards and the longest wildcard wins", async () => {
    const [exact, narrow, wide] = await Promise.all([startBackend("exact"), startBackend("narrow"), startBackend("wide")])
    const dir = makeConfigDir(proxyToml(), {
      "exact.toml": `domains = ["play.mc.example.com"]\naddresses = ["127.0.0.1:${exact.port}"]`,
      "narrow.toml": `domains = ["*.mc.example.com"]\naddresses = ["127.0.0.1:${narrow.port}"]`,
      "wide.toml": `domains = ["*.example.com"]\naddresses = ["127.0.0.1:${wide.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    const motd = async (host: string) => reasonText((await ping(portal.port, host)).description)
    expect(await motd("play.mc.example.com")).toBe("motd of exact")
    expect(await motd("other.mc.example.com")).toBe("motd of narrow")
    expect(await motd("x.example.com")).toBe("motd of wide")
  })

  it.each([1, 2])("a server's domains are cached apart; the names under a wildcard share one entry (worker_threads = %i)", async (workers) => {
    const backend = await startBackend("net", { motdPerHost: true })
    const dir = makeConfigDir(proxyToml(`worker_threads = ${workers}\n[status_cache]\nttl = "30s"`), {
      "net.toml": `domains = ["a.example.com", "b.example.com", "*.w.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    const motd = async (host: string) => reasonText((await ping(portal.port, host)).description)
    expect(await motd("a.example.com")).toBe("motd of net for a.example.com")
    expect(await motd("B.example.com.")).toBe("motd of net for B.example.com.")
    // Cached: the same answers again, without asking the backend.
    const asked = backend.handshakes.length
    expect(await motd("a.example.com")).toBe("motd of net for a.example.com")
    expect(await motd("b.example.com")).toBe("motd of net for B.example.com.")
    // A wildcard's names: the first one asked stands for all of them until the ttl ends.
    expect(await motd("one.w.example.com")).toBe("motd of net for one.w.example.com")
    expect(await motd("two.w.example.com")).toBe("motd of net for one.w.example.com")
    expect(backend.handshakes.length).toBe(asked + 1)
  })

  it("Forge markers are kept for the backend but ignored for routing", async () => {
    const backend = await startBackend("forge")
    const dir = makeConfigDir(proxyToml(), { "f.toml": `domains = ["mods.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]` })
    const portal = await startPortal(dir.configFile)
    expect(await join(portal.port, "Mods.Example.com\0FML2\0", { version: "1.12.2" })).toEqual({ _tag: "Kicked", reason: "kick: forge" })
    expect(backend.handshakes.at(-1)!.host).toBe("Mods.Example.com\0FML2\0")
  })
})

describe("unknown domains", () => {
  it("default_motd: a ping shows [default_motd], a login is told no server answers", async () => {
    const dir = makeConfigDir(proxyToml(`[default_motd.online]\ntext = "§7Nothing here"\nversion_name = "Portal"\nmax_players = 7`))
    const portal = await startPortal(dir.configFile)
    const answer = await ping(portal.port, "nowhere.example.com")
    expect(reasonText(answer.description)).toBe("§7Nothing here")
    expect(answer.players).toMatchObject({ max: 7, online: 0 })
    expect(answer.version?.name).toBe("Portal")
    const result = await join(portal.port, "nowhere.example.com")
    expect(result._tag === "Kicked" && result.reason).toMatch(/There is no server at .*nowhere\.example\.com/)
    await waitFor(() => portal.logs.some((line) => line.includes('login for unknown domain "nowhere.example.com" refused')), { what: "the refusal's log line" })
    // A host of 2 KiB is logged cut, with its length: refused logins must not fill the log.
    const long = `${"a".repeat(200)}.example.com`
    expect((await join(portal.port, long))._tag).toBe("Kicked")
    // Lines from worker threads reach the log a moment after the player's kick.
    const line = await waitFor(() => portal.logs.find((entry) => entry.includes("login for unknown domain") && entry.includes("aaaa")), {
      what: "the long host's log line"
    })
    expect(line).toContain(`"${"a".repeat(128)}"... (${long.length} characters) refused`)
  })

  it("default_motd without the table shows a built-in text", async () => {
    const portal = await startPortal(makeConfigDir(proxyToml()).configFile)
    expect(reasonText((await ping(portal.port, "nowhere.example.com")).description)).toMatch(/No server answers to this address/)
  })

  it("drop: pings and logins are closed without a byte", async () => {
    const dir = makeConfigDir(proxyToml(`unknown_domain_behavior = "drop"`))
    const portal = await startPortal(dir.configFile)
    await expect(ping(portal.port, "nowhere.example.com")).rejects.toThrow()
    expect(await join(portal.port, "nowhere.example.com")).toEqual({ _tag: "Closed" })
  })

  it("a server without domains is not routable", async () => {
    const backend = await startBackend("hidden")
    const dir = makeConfigDir(proxyToml(`unknown_domain_behavior = "drop"`), { "hidden.toml": `addresses = ["127.0.0.1:${backend.port}"]` })
    const portal = await startPortal(dir.configFile)
    expect(await join(portal.port, "hidden")).toEqual({ _tag: "Closed" })
    expect(backend.logins).toBe(0)
  })
})

describe("listener", () => {
  it("listens on IPv6 and sees the client's IPv6 address", async () => {
    const backend = await startBackend("six")
    const dir = makeConfigDir(`bind = "[::1]:0"`, {
      "six.toml": `domains = ["six.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\nforwarding_mode = "legacy"`
    })
    const portal = await startPortal(dir.configFile)
    expect(await join(portal.port, "six.example.com", { address: "::1", version: "1.12.2" })).toEqual({ _tag: "Kicked", reason: "kick: six" })
    expect(backend.handshakes.at(-1)!.host.split("\0")[1]).toBe("::1")
  })

  it("a transfer (next state 3) is routed like a login and reaches the backend as a login", async () => {
    const { recordingBackend, exchange } = await import("../peers/raw.js")
    const recorder = await recordingBackend()
    const dir = makeConfigDir(proxyToml(), { "t.toml": `domains = ["t.example.com"]\naddresses = ["127.0.0.1:${recorder.port}"]` })
    const portal = await startPortal(dir.configFile)
    const handshake = (nextState: number) =>
      Buffer.concat([Buffer.from([0x14, 0x00, 0xfe, 0x05, 0x0d]), Buffer.from("t.example.com"), Buffer.from([0x63, 0xdd, nextState])])
    const loginStart = Buffer.concat([Buffer.from([0x17, 0x00, 0x05]), Buffer.from("Steve"), Buffer.alloc(16, 1)])
    await exchange(portal.port, [handshake(3), loginStart], { timeoutMs: 1000 })
    expect(recorder.connections[0]).toEqual(Buffer.concat([handshake(2), loginStart]))
  })
})
