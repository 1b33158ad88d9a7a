/**
 * Server lifecycle through the proxy with real peers: a `local` server that is a real child process running a
 * minecraft-protocol server, and a fake hosting panel as a real HTTP server. Short real durations throughout.
 */
import { Effect, Stream } from "effect"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { freePort } from "../helpers/net.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { waitFor } from "../helpers/wait.js"
import { type HealthChange, HealthMonitor } from "../../src/services/HealthMonitor.js"
import { type FakePanel, startFakePanel } from "../peers/fakePanel.js"
import { join, ping, reasonText, startBackend } from "../peers/minecraft.js"

const LOCAL_SERVER = path.resolve("test/peers/localServer.mjs")


const localServerFile = (port: number, manager: string, extraArgs: Array<string> = []) =>
  [
    `domains = ["local.example.com"]`,
    `addresses = ["127.0.0.1:${port}"]`,
    `disconnect_message = "Could not start the server."`,
    `[motd.sleeping]\ntext = "§7Asleep - join to wake"`,
    `[motd.starting]\ntext = "§eWaking up"`,
    `[server_manager]`,
    `type = "local"`,
    `command = ${JSON.stringify(process.execPath)}`,
    `args = ${JSON.stringify([LOCAL_SERVER, "--port", String(port), ...extraArgs])}`,
    `working_dir = "."`,
    `shutdown_timeout = "2s"`,
    manager
  ].join("\n")

describe("local server manager", () => {
  it("a ping shows the sleeping MOTD without waking; a join wakes the server and gets in; idle shutdown puts it back to sleep", async () => {
    const port = await freePort()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, {
      "local.toml": localServerFile(port, `shutdown_after = "1s"\nstart_timeout = "20s"`, ["--ready-after", "300"])
    })
    const portal = await startPortal(dir.configFile)
    expect(reasonText((await ping(portal.port, "local.example.com")).description)).toBe("§7Asleep - join to wake")
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(portal.logs.some((line) => /sleeping -> starting/.test(line))).toBe(false)

    const joined = await join(portal.port, "local.example.com", { timeoutMs: 20_000 })
    expect(joined._tag).toBe("Joined")
    await portal.waitForLog(/local: starting -> online/)
    // Work done for the server is logged under its name alone, though a player's login asked for it.
    const woken = portal.logs.find((line) => /sleeping -> starting/.test(line))
    expect(woken).toMatch(/ server=local$/)
    expect(woken).not.toMatch(/conn=|ip=/)
    // The process's own output is logged under the server's name.
    await portal.waitForLog(/Steve joined the game.*server=local/)
    // Online: the live answer of the running process.
    expect(reasonText((await ping(portal.port, "local.example.com")).description)).toBe("local test server")

    if (joined._tag === "Joined") joined.leave()
    await portal.waitForLog(/local: online -> stopping/, 8000)
    await portal.waitForLog(/local: stopping -> sleeping/, 8000)
    expect(reasonText((await ping(portal.port, "local.example.com")).description)).toBe("§7Asleep - join to wake")
  }, 30_000)

  it("with [active_health], a sleeping server's failed probes are a debug line, not a warning each time it sleeps", async () => {
    const port = await freePort()
    const health = `[active_health]\nenabled = true\ninterval = "100ms"\nunhealthy_interval = "100ms"\ntimeout = "300ms"`
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, {
      "local.toml": localServerFile(port, `shutdown_after = "1s"\nstart_timeout = "20s"\n${health}`, ["--ready-after", "300"])
    })
    const portal = await startPortal(dir.configFile)
    const downWarnings = () => portal.logs.filter((line) => line.startsWith("WARN") && /health: local .* is down/.test(line))
    await portal.waitForLog(/DEBUG health: local 127\.0\.0\.1:\d+ is down \(.*\); the server is sleeping/, 5000)
    const joined = await join(portal.port, "local.example.com", { username: "Alex", timeoutMs: 20_000 })
    expect(joined._tag).toBe("Joined")
    // Back up after a wake is no news either: the outage before it was expected.
    await portal.waitForLog(/DEBUG health: local 127\.0\.0\.1:\d+ is up again/, 5000)
    // The health events (the admin API's backend.health) say why the outage was expected.
    const events: Array<HealthChange> = []
    await portal.run(
      Effect.flatMap(HealthMonitor, (monitor) =>
        Effect.forkDaemon(Effect.scoped(Effect.flatMap(monitor.subscribe, (changes) => Stream.runForEach(changes, (change) => Effect.sync(() => events.push(change))))))
      )
    )
    if (joined._tag === "Joined") joined.leave()
    await portal.waitForLog(/local: stopping -> sleeping/, 8000)
    await waitFor(() => portal.logs.filter((line) => /health: local .* is down/.test(line)).length >= 2, { what: "the probe failing again once asleep" })
    await waitFor(() => events.some((event) => !event.healthy), { what: "the health event of the outage" })
    expect(events.find((event) => !event.healthy)?.reason).toMatch(/; the server is (stopping|sleeping)$/)
    expect(downWarnings()).toEqual([])
    expect(portal.logs.filter((line) => /^INFO health: local/.test(line))).toEqual([])
  }, 30_000)

  it("many joins at once start the server once, and all get in", async () => {
    const port = await freePort()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, { "local.toml": localServerFile(port, "", ["--ready-after", "500"]) })
    const portal = await startPortal(dir.configFile)
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => join(portal.port, "local.example.com", { username: `p${i}`, timeoutMs: 20_000 }))
    )
    expect(results.map((result) => result._tag)).toEqual(Array(6).fill("Joined"))
    expect(portal.logs.filter((line) => /local: sleeping -> starting/.test(line))).toHaveLength(1)
  }, 30_000)

  it("joins on both worker threads at once start the server once, and all get in", async () => {
    const port = await freePort()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 2\nso_reuseport = true`, {
      "local.toml": localServerFile(port, "", ["--ready-after", "500"])
    })
    const portal = await startPortal(dir.configFile)
    // The kernel spreads connections by their addresses: with 16, all on one worker has a chance of 1 in 32,768
    // (with 8 it was 1 in 128, and it happened).
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        join(portal.port, "local.example.com", { username: `p${i}`, timeoutMs: 20_000, localAddress: `127.0.0.${20 + i}` })
      )
    )
    expect(results.map((result) => result._tag)).toEqual(Array(16).fill("Joined"))
    expect(new Set(portal.logs.filter((line) => /joined local via/.test(line)).map((line) => /worker=(\d)/.exec(line)?.[1]))).toEqual(
      new Set(["1", "2"])
    )
    expect(portal.logs.filter((line) => /local: sleeping -> starting/.test(line))).toHaveLength(1)
  }, 30_000)

  it("a [server_manager] a reload adds or removes shows in every worker's pings within a second", async () => {
    const port = await freePort()
    const plain = `domains = ["local.example.com"]\naddresses = ["127.0.0.1:${port}"]\n[motd.sleeping]\ntext = "§7Asleep - join to wake"`
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 2\nso_reuseport = true\n[status_cache]\nttl = "1ms"`, { "local.toml": plain })
    const portal = await startPortal(dir.configFile)
    // Sixteen addresses: all on one worker has a chance of 1 in 32,768.
    const pingAll = () =>
      Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          ping(portal.port, "local.example.com", "1.20.4", undefined, "127.0.0.1", `127.0.0.${40 + i}`).then((answer) => reasonText(answer.description))
        )
      )
    // Managed from now on: asleep, on both workers (a transition-less change: the manager tracks it from its first state).
    dir.write("servers/local.toml", localServerFile(port, ""))
    await portal.waitForLog(/managed by the local provider; state sleeping/)
    await new Promise((resolve) => setTimeout(resolve, 1000))
    expect(new Set(await pingAll())).toEqual(new Set(["§7Asleep - join to wake"]))
    // Not managed any more, and a backend runs there: its own answer, on both workers.
    await startBackend("plain", { port })
    dir.write("servers/local.toml", plain)
    await portal.waitForLog(/no longer managed: \[server_manager\] was removed/)
    await new Promise((resolve) => setTimeout(resolve, 1000))
    expect(new Set(await pingAll())).toEqual(new Set(["motd of plain"]))
  }, 30_000)

  it("a start that is not ready within start_timeout ends as crashed, and the player is told", async () => {
    const port = await freePort()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, {
      "local.toml": localServerFile(port, `start_timeout = "1s"`, ["--never-ready"])
    })
    const portal = await startPortal(dir.configFile)
    const result = await join(portal.port, "local.example.com", { timeoutMs: 10_000 })
    expect(result).toEqual({ _tag: "Kicked", reason: "Could not start the server." })
    await portal.waitForLog(/local: starting -> crashed \(not ready within 1s/)
  }, 20_000)

  it("a join that outlasts the wake wait is told the server is starting", async () => {
    process.env.PORTAL_WAKE_WAIT_MS = "500"
    try {
      const port = await freePort()
      const dir = makeConfigDir(`bind = "127.0.0.1:0"`, { "local.toml": localServerFile(port, "", ["--ready-after", "3000"]) })
      const portal = await startPortal(dir.configFile)
      const result = await join(portal.port, "local.example.com", { timeoutMs: 10_000 })
      expect(result._tag === "Kicked" && result.reason).toMatch(/The server is starting/)
      expect(reasonText((await ping(portal.port, "local.example.com")).description)).toBe("§eWaking up")
    } finally {
      delete process.env.PORTAL_WAKE_WAIT_MS
    }
  }, 20_000)
})

/** A server file for p.example.com managed by `panel`, polled every 100 ms. */
const panelServerFile = (panel: FakePanel, port: number, extra = "") =>
  [
    `domains = ["p.example.com"]`,
    `addresses = ["127.0.0.1:${port}"]`,
    `[server_manager]`,
    `type = "panel"`,
    `api_url = "${panel.url}"`,
    `api_key = "${panel.apiKey}"`,
    `server_id = "${panel.serverId}"`,
    `poll_interval = "100ms"`,
    extra
  ].join("\n")

describe("panel server manager", () => {
  it("a join to a server a reload has just added waits for its manager's first answer, then wakes it", async () => {
    const port = await freePort()
    const panel = await startFakePanel({ startMs: 300 })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`)
    const portal = await startPortal(dir.configFile)
    panel.failure = { _tag: "Slow", delayMs: 1500 }
    dir.write("servers/p.toml", panelServerFile(panel, port))
    await portal.waitForLog(/servers reloaded: added p/)
    const pending = join(portal.port, "p.example.com", { timeoutMs: 15_000 })
    panel.failure = { _tag: "None" }
    // The backend comes up once the panel was asked to start it: a join dialed at once would find nothing.
    await waitFor(() => panel.signals.includes("start"), { timeoutMs: 8000, what: `a start signal\n${portal.logs.join("\n")}` })
    await startBackend("p", { hold: true, port })
    expect((await pending)._tag).toBe("Joined")
    await portal.waitForLog(/p: sleeping -> starting \(a player is joining\)/)
  }, 30_000)

  it("with [active_health], a server a reload has just added fails its probes quietly until its manager has reported", async () => {
    const panel = await startFakePanel()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`)
    const portal = await startPortal(dir.configFile)
    panel.failure = { _tag: "Slow", delayMs: 1500 }
    const health = `[active_health]\nenabled = true\ninterval = "100ms"\nunhealthy_interval = "100ms"\ntimeout = "300ms"`
    dir.write("servers/p.toml", panelServerFile(panel, await freePort(), health))
    await portal.waitForLog(/DEBUG health: p 127\.0\.0\.1:\d+ is down \(.*\); its server manager has not reported yet/)
    await portal.waitForLog(/managed by the panel provider; state sleeping/)
    expect(portal.logs.filter((line) => /^WARN health: p/.test(line))).toEqual([])
  }, 30_000)

  it("a panel start past start_timeout stays crashed while the panel still says starting, and is online once it runs", async () => {
    const backend = await startBackend("panel-backed", { hold: true })
    const panel = await startFakePanel({ startMs: 60_000 })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, { "p.toml": panelServerFile(panel, backend.port, `start_timeout = "1s"`) })
    const portal = await startPortal(dir.configFile)
    const first = await join(portal.port, "p.example.com", { username: "Early", timeoutMs: 15_000 })
    expect(first._tag).toBe("Kicked")
    await portal.waitForLog(/p: starting -> crashed \(not ready within 1s\)/)
    // Ten more polls of a panel still answering "starting": no flapping back to starting.
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    expect(portal.logs.filter((line) => /p: crashed -> starting/.test(line))).toEqual([])
    panel.state = "running"
    await portal.waitForLog(/p: crashed -> online/)
    expect((await join(portal.port, "p.example.com", { username: "Late", timeoutMs: 15_000 }))._tag).toBe("Joined")
  }, 30_000)

  it("concurrent joins send one start signal; the players get in once the panel says running", async () => {
    const backend = await startBackend("panel-backed", { hold: true })
    const panel = await startFakePanel({ startMs: 600 })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, { "p.toml": panelServerFile(panel, backend.port, `shutdown_after = "1s"`) })
    const portal = await startPortal(dir.configFile)
    const results = await Promise.all(Array.from({ length: 4 }, (_, i) => join(portal.port, "p.example.com", { username: `q${i}`, timeoutMs: 15_000 })))
    expect(results.map((result) => result._tag)).toEqual(Array(4).fill("Joined"))
    expect(panel.signals).toEqual(["start"])
    expect(panel.requests.every((request) => request.authorization === `Bearer ${panel.apiKey}`)).toBe(true)
    for (const result of results) if (result._tag === "Joined") result.leave()
    await waitFor(() => (panel.signals.includes("stop") ? true : undefined), { timeoutMs: 8000, what: "idle stop signal" })
  }, 30_000)
})
