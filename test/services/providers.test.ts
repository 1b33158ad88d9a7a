/**
 * ServerManager providers against real peers: `local` runs test/peers/localServer.mjs (a real minecraft-protocol
 * server process); `panel` and `controller` talk to fake APIs on real HTTP servers. Short real durations.
 */
import { FetchHttpClient } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { Effect, Either, Layer, Logger, LogLevel, ManagedRuntime, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import type { ServerState } from "../../src/schema/common.js"
import { decodeServerText } from "../../src/schema/decode.js"
import { GlobalConfig } from "../../src/schema/GlobalConfig.js"
import { ConfigStore, type ConfigSnapshot } from "../../src/services/ConfigStore.js"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"
import { type EnsureResult, ServerManager, type ServerManagerOptions } from "../../src/services/ServerManager.js"
import { logFieldsOf } from "../../src/services/log/connectionFields.js"
import { startFakeController } from "../peers/fakeController.js"
import { startFakePanel } from "../peers/fakePanel.js"
import { join, ping } from "../peers/minecraft.js"
import { waitFor } from "../helpers/wait.js"

const SCRIPT = path.resolve("test/peers/localServer.mjs")
const toml = (value: string) => JSON.stringify(value)

interface Harness {
  readonly manager: ServerManager
  readonly logs: Array<string>
  run<A, E>(effect: Effect.Effect<A, E, ServerManager | PlayerRegistry>): Promise<A>
  state(id: string): Promise<ServerState>
  waitState(id: string, state: ServerState, timeoutMs?: number): Promise<void>
  waitLog(pattern: RegExp, timeoutMs?: number): Promise<string>
  ensureOnline(id: string): Promise<EnsureResult>
  dispose(): Promise<void>
}

const harnesses: Array<Harness> = []
const tempDirs: Array<string> = []
afterEach(async () => {
  for (const harness of harnesses.splice(0)) await harness.dispose()
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const snapshotOf = (servers: Record<string, string>): ConfigSnapshot => ({
  configFile: "/etc/portal/proxy.toml",
  global: Schema.decodeUnknownSync(GlobalConfig)({}),
  servers: new Map(
    Object.entries(servers).map(([id, body]) => [id, Either.getOrThrow(decodeServerText(`/srv/${id}.toml`, `${id}.toml`, body))])
  ),
  revision: 1
})

const startManager = async (servers: Record<string, string>, options: ServerManagerOptions = {}): Promise<Harness> => {
  const logs: Array<string> = []
  const capture = Logger.make(({ message, logLevel, annotations, context }) => {
    const text = Array.isArray(message) ? message.join(" ") : String(message)
    const fields = logFieldsOf({ annotations, context }).map(([key, value]) => `${key}=${String(value)}`).join(" ")
    logs.push(`${logLevel.label} ${text}${fields.length > 0 ? ` ${fields}` : ""}`)
  })
  const layer = ServerManager.Default(options).pipe(
    Layer.provideMerge(Layer.mergeAll(ConfigStore.layerStatic(snapshotOf(servers)), PlayerRegistry.Default, NodeContext.layer, FetchHttpClient.layer)),
    Layer.provide(Layer.merge(Logger.replace(Logger.defaultLogger, capture), Logger.minimumLogLevel(LogLevel.Debug)))
  )
  const runtime = ManagedRuntime.make(layer)
  const manager = await runtime.runPromise(ServerManager)
  let disposed = false
  const harness: Harness = {
    manager,
    logs,
    run: (effect) => runtime.runPromise(effect),
    state: (id) => runtime.runPromise(manager.stateOf(id)),
    waitState: (id, state, timeoutMs = 8000) =>
      waitFor(async () => (await runtime.runPromise(manager.stateOf(id))) === state, {
        timeoutMs,
        what: `${id} to be ${state}\n${logs.join("\n")}`
      }).then(() => undefined),
    waitLog: (pattern, timeoutMs = 8000) =>
      waitFor(() => logs.find((line) => pattern.test(line)), { timeoutMs, what: `log ${pattern}\n${logs.join("\n")}` }),
    ensureOnline: (id) => runtime.runPromise(manager.ensureOnline(id)),
    dispose: async () => {
      if (disposed) return
      disposed = true
      await runtime.dispose()
    }
  }
  harnesses.push(harness)
  return harness
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const pidFrom = async (harness: Harness) => Number((await harness.waitLog(/\(pid (\d+)\)/)).match(/\(pid (\d+)\)/)![1])
const portFrom = async (harness: Harness) =>
  Number((await harness.waitLog(/Starting Minecraft server on 127\.0\.0\.1:(\d+)/)).match(/127\.0\.0\.1:(\d+)/)![1])

describe("local provider", () => {
  const workDir = () => {
    const dir = mkdtempSync(path.join(tmpdir(), "portal-local-"))
    tempDirs.push(dir)
    return dir
  }
  const local = (args: ReadonlyArray<string>, extra = "", command = process.execPath, dir = workDir()) =>
    `addresses = ["127.0.0.1:25565"]
[server_manager]
type = "local"
command = ${toml(command)}
args = [${[SCRIPT, ...args].map(toml).join(", ")}]
working_dir = ${toml(dir)}
ready_pattern = 'For help, type "help"'
shutdown_timeout = "2s"
start_timeout = "10s"
${extra}`

  it("a join starts the process, its output is logged, and a real client can join it", async () => {
    const harness = await startManager({ lobby: local(["--ready-after", "200", "--long-line", "10000"]) })
    expect(await harness.state("lobby")).toBe("sleeping")
    expect(harness.logs.some((line) => line.includes("pid"))).toBe(false) // nothing starts at boot
    expect(await harness.ensureOnline("lobby")).toEqual({ _tag: "Online" })
    expect(await harness.state("lobby")).toBe("online")
    // Output lines: stdout at INFO, stderr at WARN, annotated with the server; long lines are cut.
    await harness.waitLog(/^INFO \[Server thread\/INFO\]: Done \(.*For help, type "help" server=lobby stream=stdout$/)
    await harness.waitLog(/^WARN \[Server thread\/WARN\]: this is a test server printing to stderr server=lobby stream=stderr$/)
    const long = await harness.waitLog(/^INFO x+ \[line truncated\]/)
    expect(long.length).toBeLessThan(4200)
    expect(harness.logs).toContainEqual(expect.stringMatching(/^INFO lobby: sleeping -> starting \(a player is joining\) server=lobby$/))
    expect(harness.logs).toContainEqual(expect.stringMatching(/^INFO lobby: starting -> online \(the ready line was printed\) server=lobby$/))
    const port = await portFrom(harness)
    const status = await ping(port, "localhost")
    expect(status.description).toBeDefined()
    const joined = await join(port, "localhost", { username: "Alex" })
    expect(joined._tag).toBe("Joined")
    if (joined._tag === "Joined") joined.leave()
    await harness.waitLog(/Alex joined the game/)
  })

  it("idle shutdown sends stop and the process exits by itself", async () => {
    const harness = await startManager({ lobby: local(["--stop-delay", "100"], `shutdown_after = "400ms"`) })
    expect(await harness.ensureOnline("lobby")).toEqual({ _tag: "Online" })
    const pid = await pidFrom(harness)
    await harness.waitState("lobby", "stopping", 5000)
    await harness.waitState("lobby", "sleeping", 5000)
    await harness.waitLog(/Stopping the server server=lobby stream=stdout/)
    expect(harness.logs).toContainEqual(expect.stringMatching(/lobby: online -> stopping \(no players for 400ms\)/))
    expect(harness.logs).toContainEqual(expect.stringMatching(/lobby: stopping -> sleeping \(process exited with code 0\)/))
    expect(harness.logs.some((line) => line.includes("did not exit within"))).toBe(false)
    await waitFor(() => !isAlive(pid), { what: `pid ${pid} to be gone` })
    // It wakes again on the next join.
    expect(await harness.ensureOnline("lobby")).toEqual({ _tag: "Online" })
  })

  it("a process that ignores stop is killed after shutdown_timeout", async () => {
    const harness = await startManager({
      lobby: local(["--ignore-stop"], `shutdown_after = "300ms"`).replace(`shutdown_timeout = "2s"`, `shutdown_timeout = "700ms"`)
    })
    expect(await harness.ensureOnline("lobby")).toEqual({ _tag: "Online" })
    const pid = await pidFrom(harness)
    await harness.waitState("lobby", "stopping", 5000)
    const stoppingAt = Date.now()
    await harness.waitState("lobby", "sleeping", 5000)
    expect(Date.now() - stoppingAt).toBeGreaterThanOrEqual(500)
    await harness.waitLog(/ignoring stop/)
    await harness.waitLog(/did not exit within 700ms after "stop"; killing it/)
    expect(harness.logs).toContainEqual(expect.stringMatching(/lobby: stopping -> sleeping \(process was killed by SIGKILL\)/))
    expect(isAlive(pid)).toBe(false)
  })

  it("an exit nobody asked for makes the server crashed, and the next join starts it again", async () => {
    const harness = await startManager({ lobby: local(["--crash-after", "600"]) })
    expect(await harness.ensureOnline("lobby")).toEqual({ _tag: "Online" })
    await harness.waitState("lobby", "crashed", 5000)
    expect(harness.logs).toContainEqual(expect.stringMatching(/lobby: online -> crashed \(process exited with code 3 unexpectedly\)/))
    await harness.waitLog(/^ERROR .*\[Server thread\/ERROR\]|^WARN .*Encountered an unexpected exception/)
    expect(await harness.ensureOnline("lobby")).toEqual({ _tag: "Online" })
  })

  it("a command that cannot be spawned makes the server crashed with a clear reason", async () => {
    const harness = await startManager({
      missing: local([], "", "/nonexistent/bin/java-for-portal-tests"),
      nodir: local([], "", process.execPath, "/nonexistent/portal-working-dir")
    })
    const missing = await harness.ensureOnline("missing")
    expect(missing).toEqual({
      _tag: "Unavailable",
      state: "crashed",
      reason: 'command "/nonexistent/bin/java-for-portal-tests" was not found (spawn ENOENT); check server_manager.command'
    })
    const nodir = await harness.ensureOnline("nodir")
    expect(nodir._tag === "Unavailable" && nodir.reason).toMatch(/^working_dir "\/nonexistent\/portal-working-dir" cannot be used \(NotFound/)
    expect(await harness.state("missing")).toBe("crashed")
    await harness.waitLog(/^ERROR cannot start the server: command .* was not found .* server=missing$/)
  })

  it("a process not ready within start_timeout is crashed and killed", async () => {
    const harness = await startManager(
      { lobby: local(["--never-ready"]).replace(`start_timeout = "10s"`, `start_timeout = "800ms"`) },
      { wakeWait: "5 seconds" }
    )
    const result = await harness.ensureOnline("lobby")
    expect(result).toEqual({ _tag: "Unavailable", state: "crashed", reason: "not ready within 800ms" })
    const pid = await pidFrom(harness)
    await waitFor(() => !isAlive(pid), { what: `pid ${pid} to be killed` })
    await harness.waitLog(/killing the server process: it did not become ready in time/)
    expect(await harness.state("lobby")).toBe("crashed")
  })

  it("closing the service stops every process it started, gracefully", async () => {
    const harness = await startManager({ a: local([]), b: local([]) })
    const [a, b] = await Promise.all([harness.ensureOnline("a"), harness.ensureOnline("b")])
    expect([a, b]).toEqual([{ _tag: "Online" }, { _tag: "Online" }])
    const pids = harness.logs.flatMap((line) => [...line.matchAll(/\(pid (\d+)\)/g)].map((match) => Number(match[1])))
    expect(new Set(pids).size).toBe(2)
    expect(pids.every(isAlive)).toBe(true)
    await harness.dispose()
    expect(pids.some(isAlive)).toBe(false)
    expect(harness.logs.filter((line) => /Stopping the server/.test(line))).toHaveLength(2)
    expect(harness.logs.some((line) => line.includes("did not exit within"))).toBe(false)
  })

  it("closing the service kills a process that ignores stop after shutdown_timeout", async () => {
    const harness = await startManager({
      lobby: local(["--ignore-stop"]).replace(`shutdown_timeout = "2s"`, `shutdown_timeout = "600ms"`)
    })
    expect(await harness.ensureOnline("lobby")).toEqual({ _tag: "Online" })
    const pid = await pidFrom(harness)
    const closing = Date.now()
    await harness.dispose()
    const took = Date.now() - closing
    expect(took).toBeGreaterThanOrEqual(500)
    expect(took).toBeLessThan(5000)
    expect(isAlive(pid)).toBe(false)
    expect(harness.logs).toContainEqual(expect.stringMatching(/did not exit within 600ms after "stop"; killing it/))
    expect(harness.logs).toContainEqual(expect.stringMatching(/server process was killed by SIGKILL server=lobby/))
  })
})

describe("panel provider", () => {
  const panelServer = (url: string, apiKey: string, serverId: string, extra = "") =>
    `addresses = ["127.0.0.1:25565"]
[server_manager]
type = "panel"
api_url = ${toml(url)}
api_key = ${toml(apiKey)}
server_id = ${toml(serverId)}
poll_interval = "100ms"
start_timeout = "5s"
${extra}`

  it("wake on join sends exactly one start for concurrent joins, with the documented headers", async () => {
    const panel = await startFakePanel({ state: "offline", startMs: 300 })
    const harness = await startManager({ lobby: panelServer(panel.url, panel.apiKey, panel.serverId) })
    expect(await harness.state("lobby")).toBe("sleeping")
    const results = await Promise.all(Array.from({ length: 10 }, () => harness.ensureOnline("lobby")))
    expect(results.every((result) => result._tag === "Online")).toBe(true)
    expect(panel.signals).toEqual(["start"])
    const power = panel.requests.find((request) => request.method === "POST")!
    expect(power).toMatchObject({
      path: `/api/client/servers/${panel.serverId}/power`,
      authorization: `Bearer ${panel.apiKey}`,
      accept: "application/json",
      contentType: "application/json"
    })
    expect(JSON.parse(power.body)).toEqual({ signal: "start" })
    const poll = panel.requests.find((request) => request.method === "GET")!
    expect(poll).toMatchObject({
      path: `/api/client/servers/${panel.serverId}/resources`,
      authorization: `Bearer ${panel.apiKey}`,
      accept: "application/json",
      contentType: "application/json"
    })
  })

  it("maps every panel state", async () => {
    const panel = await startFakePanel({ state: "running" })
    const harness = await startManager({ lobby: panelServer(panel.url, panel.apiKey, panel.serverId) })
    expect(await harness.state("lobby")).toBe("online")
    panel.state = "stopping"
    await harness.waitState("lobby", "stopping")
    panel.state = "offline"
    await harness.waitState("lobby", "sleeping")
    panel.state = "starting"
    await harness.waitState("lobby", "starting")
    panel.state = "running"
    await harness.waitState("lobby", "online")
    expect(panel.signals).toEqual([])
  })

  it("a refused key makes the server offline with a clear log line, and polling goes on at poll_interval", async () => {
    const panel = await startFakePanel({ state: "offline" })
    panel.failure = { _tag: "Unauthorized", status: 401 }
    const harness = await startManager({ lobby: panelServer(panel.url, panel.apiKey, panel.serverId) })
    expect(await harness.state("lobby")).toBe("offline")
    const result = await harness.ensureOnline("lobby")
    expect(result._tag === "Unavailable" && result.reason).toMatch(/the panel API refused the API key \(HTTP 401 to GET \/api\/client\/servers\/.*\/resources\)/)
    const before = panel.count("GET", "/resources")
    await new Promise((resolve) => setTimeout(resolve, 1000))
    const polls = panel.requests.filter((request) => request.method === "GET")
    const during = polls.length - before
    expect(during).toBeGreaterThanOrEqual(4)
    expect(during).toBeLessThanOrEqual(12)
    const gaps = polls.slice(1).map((request, index) => request.at - polls[index]!.at)
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(80)
    // One warning for the problem, not one per poll; no start was attempted.
    const warnings = harness.logs.filter((line) => /^WARN .*refused the API key.*check server_manager\.api_key/.test(line))
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatch(/Portal keeps trying every 100ms server=lobby$/)
    expect(panel.signals).toEqual([])
    // A valid key again: the server is usable.
    panel.failure = { _tag: "None" }
    await harness.waitState("lobby", "sleeping")
    await harness.waitLog(/the panel API answers again/)
  })

  it("HTTP 500 and an unreachable API make the server offline until the API recovers", async () => {
    const panel = await startFakePanel({ state: "running" })
    const harness = await startManager({ lobby: panelServer(panel.url, panel.apiKey, panel.serverId) })
    expect(await harness.state("lobby")).toBe("online")
    panel.failure = { _tag: "Error", status: 500 }
    await harness.waitState("lobby", "offline")
    await harness.waitLog(/lobby: online -> offline \(the panel API answered HTTP 500 to GET/)
    panel.failure = { _tag: "None" }
    await harness.waitState("lobby", "online")
    await panel.down()
    await harness.waitState("lobby", "offline")
    await harness.waitLog(/lobby: online -> offline \(cannot reach the panel API at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)\)/)
    expect((await harness.ensureOnline("lobby"))._tag).toBe("Unavailable")
    await panel.up()
    await harness.waitState("lobby", "online")
  })

  it("a problem that changes while the server is offline is logged once, not again by the state machine", async () => {
    const panel = await startFakePanel({ state: "running" })
    const harness = await startManager({ lobby: panelServer(panel.url, panel.apiKey, panel.serverId) })
    panel.failure = { _tag: "Error", status: 500 }
    await harness.waitLog(/lobby: online -> offline \(the panel API answered HTTP 500/)
    panel.failure = { _tag: "Error", status: 502 }
    await harness.waitLog(/WARN the panel API answered HTTP 502/)
    panel.failure = { _tag: "None" }
    await harness.waitState("lobby", "online")
    expect(harness.logs.filter((line) => /HTTP 502/.test(line))).toHaveLength(1)
  })

  it("a slow API counts as unreachable after the request timeout", async () => {
    const panel = await startFakePanel({ state: "running" })
    const harness = await startManager({ lobby: panelServer(panel.url, panel.apiKey, panel.serverId) }, { requestTimeout: "300 millis" })
    panel.failure = { _tag: "Slow", delayMs: 2000 }
    await harness.waitState("lobby", "offline")
    await harness.waitLog(/did not answer GET \/api\/client\/servers\/.*\/resources within 300ms/)
    panel.failure = { _tag: "None" }
    await harness.waitState("lobby", "online")
  })

  it("a panel that does not answer at startup delays nothing past the request timeout", async () => {
    const panel = await startFakePanel({ state: "running" })
    panel.failure = { _tag: "Slow", delayMs: 5000 }
    const started = Date.now()
    const harness = await startManager({ lobby: panelServer(panel.url, panel.apiKey, panel.serverId) }, { requestTimeout: "400 millis" })
    expect(Date.now() - started).toBeLessThan(2000)
    expect(await harness.state("lobby")).toBe("offline")
    panel.failure = { _tag: "None" }
    await harness.waitState("lobby", "online")
  })

  it("an answer that is not the API's (not JSON, another shape, a field of the wrong type) is reported once per problem; polling goes on", async () => {
    const panel = await startFakePanel({ state: "running" })
    const harness = await startManager({ lobby: panelServer(panel.url, panel.apiKey, panel.serverId) })
    expect(await harness.state("lobby")).toBe("online")
    const cases = [
      { text: "<html><body>Please log in</body></html>", message: /the panel API answered \/api\/client\/servers\/a1b2c3d4\/resources with something that is not JSON/ },
      { text: `{"data":[]}`, message: /unexpected answer from the panel API: attributes: is missing/ },
      { text: `{"attributes":{"current_state":42}}`, message: /unexpected answer from the panel API: attributes\.current_state: expected running, starting, stopping or offline, got 42/ },
      { text: `{"attributes":{"current_state":"exploded"}}`, message: /unexpected answer from the panel API: attributes\.current_state: expected running, starting, stopping or offline, got "exploded"/ },
      { text: "null", message: /unexpected answer from the panel API: expected an object with attributes, got null/ }
    ]
    for (const { text, message } of cases) {
      panel.failure = { _tag: "Body", text }
      await harness.waitState("lobby", "offline")
      const warning = await harness.waitLog(new RegExp(`^WARN ${message.source}; Portal keeps trying every 100ms server=lobby$`))
      const before = panel.count("GET", "/resources")
      await waitFor(() => panel.count("GET", "/resources") >= before + 3, { what: "polls to go on" })
      expect(harness.logs.filter((line) => line === warning)).toHaveLength(1)
      panel.failure = { _tag: "None" }
      await harness.waitState("lobby", "online")
    }
    expect(harness.logs.filter((line) => /the panel API answers again/.test(line))).toHaveLength(cases.length)
    expect(panel.signals).toEqual([])
  })

  it("idle shutdown sends stop", async () => {
    const panel = await startFakePanel({ state: "running", stopMs: 300 })
    const harness = await startManager({ lobby: panelServer(panel.url, panel.apiKey, panel.serverId, `shutdown_after = "500ms"`) })
    await harness.waitState("lobby", "stopping")
    await harness.waitState("lobby", "sleeping")
    expect(panel.signals).toEqual(["stop"])
    expect(JSON.parse(panel.requests.find((request) => request.method === "POST")!.body)).toEqual({ signal: "stop" })
  })
})

describe("controller provider", () => {
  const controllerServer = (url: string, apiKey: string, serverId: string, extra = "") =>
    `addresses = ["127.0.0.1:25565"]
[server_manager]
type = "controller"
api_url = ${toml(url)}
api_key = ${toml(apiKey)}
server_id = ${toml(serverId)}
poll_interval = "100ms"
start_timeout = "5s"
${extra}`

  it("wake on join sends exactly one start_server for concurrent joins", async () => {
    const controller = await startFakeController({ state: "stopped", startMs: 300 })
    const harness = await startManager({ lobby: controllerServer(controller.url, controller.apiKey, controller.serverId) })
    expect(await harness.state("lobby")).toBe("sleeping")
    const results = await Promise.all(Array.from({ length: 10 }, () => harness.ensureOnline("lobby")))
    expect(results.every((result) => result._tag === "Online")).toBe(true)
    expect(controller.actions).toEqual(["start_server"])
    const action = controller.requests.find((request) => request.method === "POST")!
    expect(action).toMatchObject({ path: `/api/v2/servers/${controller.serverId}/action/start_server`, authorization: `Bearer ${controller.apiKey}` })
    expect(controller.requests.find((request) => request.method === "GET")!.path).toBe(`/api/v2/servers/${controller.serverId}/stats`)
  })

  it("maps running, waiting_start, crashed and stopped", async () => {
    const controller = await startFakeController({ state: "crashed" })
    const harness = await startManager({ lobby: controllerServer(controller.url, controller.apiKey, controller.serverId) })
    expect(await harness.state("lobby")).toBe("crashed")
    controller.state = "starting"
    await harness.waitState("lobby", "starting")
    controller.state = "running"
    await harness.waitState("lobby", "online")
    controller.state = "stopped"
    await harness.waitState("lobby", "sleeping")
    controller.state = "crashed"
    await harness.waitState("lobby", "crashed")
  })

  it("a refused key (403) makes the server offline; it recovers with the key accepted", async () => {
    const controller = await startFakeController({ state: "running" })
    controller.failure = { _tag: "Unauthorized", status: 403 }
    const harness = await startManager({ lobby: controllerServer(controller.url, controller.apiKey, controller.serverId) })
    expect(await harness.state("lobby")).toBe("offline")
    await harness.waitLog(/^WARN the controller API refused the API key \(HTTP 403 to GET \/api\/v2\/servers\/7\/stats\)/)
    controller.failure = { _tag: "None" }
    await harness.waitState("lobby", "online")
  })

  it("an answer that is not the API's is reported once per problem; polling goes on and the server recovers", async () => {
    const controller = await startFakeController({ state: "running" })
    const harness = await startManager({ lobby: controllerServer(controller.url, controller.apiKey, controller.serverId) })
    expect(await harness.state("lobby")).toBe("online")
    const cases = [
      { text: "Internal error, see the logs", message: /the controller API answered \/api\/v2\/servers\/7\/stats with something that is not JSON/ },
      { text: `{"status":"ok","data":{}}`, message: /unexpected answer from the controller API: data\.running: is missing/ },
      { text: `{"status":"ok","data":{"running":"yes"}}`, message: /unexpected answer from the controller API: data\.running: expected true or false, got "yes"/ },
      { text: `{"status":"ok","data":{"running":false,"crashed":"no"}}`, message: /unexpected answer from the controller API: data\.crashed: expected true or false, got "no"/ },
      { text: `{"status":"error","data":{"running":true}}`, message: /unexpected answer from the controller API: status: expected "ok", got "error"/ }
    ]
    for (const { text, message } of cases) {
      controller.failure = { _tag: "Body", text }
      await harness.waitState("lobby", "offline")
      const warning = await harness.waitLog(new RegExp(`^WARN ${message.source}; Portal keeps trying every 100ms server=lobby$`))
      const before = controller.count("GET", "/stats")
      await waitFor(() => controller.count("GET", "/stats") >= before + 3, { what: "polls to go on" })
      expect(harness.logs.filter((line) => line === warning)).toHaveLength(1)
      controller.failure = { _tag: "None" }
      await harness.waitState("lobby", "online")
    }
    expect(controller.actions).toEqual([])
  })

  it("idle shutdown sends stop_server", async () => {
    const controller = await startFakeController({ state: "running", stopMs: 300 })
    const harness = await startManager({ lobby: controllerServer(controller.url, controller.apiKey, controller.serverId, `shutdown_after = "500ms"`) })
    await harness.waitState("lobby", "stopping")
    await harness.waitState("lobby", "sleeping")
    expect(controller.actions).toEqual(["stop_server"])
  })
})
