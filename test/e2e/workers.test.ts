/**
 * The data plane on two worker threads: connections spread over both (SO_REUSEPORT, one client's many source
 * ports), and every limit holds proxy-wide, exactly as configured; bans, kicks and reloads reach every worker; a
 * worker that crashes is replaced without touching the other's sessions; shutdown drains both.
 */
import { Effect, Ref } from "effect"
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { BanStore } from "../../src/services/BanStore.js"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"
import { Stats, type StatsSnapshot } from "../../src/services/Stats.js"
import { WorkerCensus, type WorkerInfo, WorkerPool } from "../../src/services/WorkerPool.js"
import { freePort } from "../helpers/net.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { waitFor } from "../helpers/wait.js"
import { join, ping, reasonText, startBackend } from "../peers/minecraft.js"

process.env.PORTAL_TEST_HOOKS = "1"

const TWO_WORKERS = `bind = "127.0.0.1:0"\nworker_threads = 2\nso_reuseport = true\nconnect_timeout = "1s"`

const setup = async (global: string, server = "", options: { hold?: boolean; backends?: number; workerLogLevel?: "debug" } = {}) => {
  const backends = await Promise.all(
    Array.from({ length: options.backends ?? 1 }, (_, i) => startBackend(`main${i}`, options.hold === true ? { hold: true } : {}))
  )
  const addresses = backends.map((backend) => `"127.0.0.1:${backend.port}"`).join(", ")
  const dir = makeConfigDir(`${TWO_WORKERS}\n${global}`, {
    "main.toml": `domains = ["mc.example.com"]\naddresses = [${addresses}]\n${server}`
  })
  const portal = await startPortal(dir.configFile, options.workerLogLevel === undefined ? {} : { workerLogLevel: options.workerLogLevel })
  return { backends, backend: backends[0]!, portal, dir }
}

/**
 * `count` logins as `p0`, `p1`, ... at most four at a time: more from one address at once would meet the bound on
 * handshakes in progress per address (eight), which is not what these tests are about.
 */
const joinMany = async (port: number, count: number, host = "mc.example.com", localAddress?: string) => {
  const results: Array<Awaited<ReturnType<typeof join>>> = []
  for (let start = 0; start < count; start += 4) {
    const batch = Array.from({ length: Math.min(4, count - start) }, (_, i) =>
      join(port, host, { username: `p${start + i}`, ...(localAddress === undefined ? {} : { localAddress }) })
    )
    results.push(...(await Promise.all(batch)))
  }
  return results
}

/** `count` pings, four at a time (see joinMany); each "ok" or "closed". */
const pingMany = async (port: number, count: number, host = "mc.example.com") => {
  const results: Array<string> = []
  for (let start = 0; start < count; start += 4) {
    const batch = Array.from({ length: Math.min(4, count - start) }, () =>
      ping(port, host).then((answer) => reasonText(answer.description), () => "closed")
    )
    results.push(...(await Promise.all(batch)))
  }
  return results
}

const registry = <A>(portal: Awaited<ReturnType<typeof startPortal>>, f: (registry: PlayerRegistry) => Effect.Effect<A>) =>
  portal.run(Effect.flatMap(PlayerRegistry, f))

/** What Stats counts (a service of the control plane, not among the layer's declared ones). */
const statsSnapshot = Effect.flatMap(Stats, (stats) => stats.snapshot) as unknown as Effect.Effect<StatsSnapshot>

/** The worker indexes (1, 2) that logged a line matching `pattern`. */
const workersThatLogged = (logs: ReadonlyArray<string>, pattern: RegExp) =>
  new Set(logs.filter((line) => pattern.test(line)).map((line) => /worker=(\d+)/.exec(line)?.[1]))

/** Raw connections that say nothing; resolves with those still open after `settleMs`. */
const openSilent = async (port: number, count: number, settleMs = 400) => {
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<net.Socket>((resolve) => {
          const socket = net.connect(port, "127.0.0.1", () => resolve(socket))
          socket.on("error", () => {})
        })
    )
  )
  const closed = new Set<net.Socket>()
  for (const socket of sockets) socket.on("close", () => closed.add(socket))
  await new Promise((resolve) => setTimeout(resolve, settleMs))
  return { open: sockets.filter((socket) => !closed.has(socket)), all: sockets }
}

describe("two worker threads", () => {
  it("spread one client's connections over both workers; routing, pings, logins and the registry cover both", async () => {
    const { portal, backend } = await setup("", "", { hold: true })
    const players = await joinMany(portal.port, 16)
    expect(players.every((player) => player._tag === "Joined")).toBe(true)
    expect(backend.players.size).toBe(16)
    await waitFor(async () => (await registry(portal, (r) => r.total)) === 16, { what: "the main registry to list all 16" })
    expect(workersThatLogged(portal.logs, /joined main via/)).toEqual(new Set(["1", "2"]))
    expect(reasonText((await ping(portal.port, "mc.example.com")).description)).toBe("motd of main0")
    // Every connection line carries the worker's index among its fields, in the main logger's one format.
    expect(portal.logs.find((line) => /joined main via/.test(line))).toMatch(/ conn=\d+ ip=127\.0\.0\.1 server=main worker=[12]$/)
  })

  it("max_connections holds across workers", async () => {
    const { portal } = await setup(`max_connections = 6`, "", { workerLogLevel: "debug" })
    const { open, all } = await openSilent(portal.port, 14)
    expect(open).toHaveLength(6)
    // Each refusal's debug line names the address it came from.
    const refused = await waitFor(() => {
      const lines = portal.logs.filter((line) => line.includes("max_connections reached"))
      return lines.length === 8 ? lines : undefined
    }, { what: "8 max_connections lines" })
    expect(refused.filter((line) => !line.includes("closed a connection from 127.0.0.1"))).toEqual([])
    for (const socket of all) socket.destroy()
  })

  it("the handshake flood bound per address holds across workers", async () => {
    const { portal } = await setup("")
    const { open, all } = await openSilent(portal.port, 20)
    // MAX_PENDING_HANDSHAKES_PER_IP: 8 handshakes in progress per address, whichever worker holds them.
    expect(open).toHaveLength(8)
    for (const socket of all) socket.destroy()
  })

  it("[rate_limit] logins and pings per address hold across workers", async () => {
    const { portal, backend } = await setup(
      `[rate_limit]\nenabled = true\nmax_connections = 3\nwindow = "1m"\nstatus_max = 4\nstatus_window = "1m"\n[status_cache]\nttl = "1ms"`
    )
    // 24 logins: the 21 refused spread over both workers but by the kernel's hash of their source ports, so that
    // both log a refusal is certain but for one chance in a million (with 10, it failed one run in 64). They come
    // from an address of their own: the refused ones hold that address's handshake places (8) until they have
    // closed, which the pings from 127.0.0.1 must not meet.
    const logins = await joinMany(portal.port, 24, "mc.example.com", "127.0.0.2")
    expect(logins.filter((result) => result._tag === "Kicked" && result.reason === "kick: main0")).toHaveLength(3)
    expect(backend.logins).toBe(3)
    const pings = await pingMany(portal.port, 10)
    expect(pings.filter((result) => result === "motd of main0")).toHaveLength(4)
    expect(workersThatLogged(portal.logs, /login over \[rate_limit\] refused/)).toEqual(new Set(["1", "2"]))
  })

  it("max_players holds across workers", async () => {
    const { portal, backend } = await setup("", "max_players = 3", { hold: true })
    const results = await joinMany(portal.port, 9)
    expect(results.filter((result) => result._tag === "Joined")).toHaveLength(3)
    expect(results.filter((result) => result._tag === "Kicked" && /full/.test(result.reason))).toHaveLength(6)
    expect(backend.players.size).toBe(3)
  })

  it("least_conn counts every worker's sessions", async () => {
    const { portal, backends } = await setup("", `balance = "least_conn"`, { hold: true, backends: 2 })
    // 16 logins: that the kernel's hash puts them all on one worker has a chance of 1 in 32,768.
    for (let i = 0; i < 16; i++) expect((await join(portal.port, "mc.example.com", { username: `p${i}` }))._tag).toBe("Joined")
    expect(workersThatLogged(portal.logs, /joined main via/)).toEqual(new Set(["1", "2"]))
    expect([backends[0]!.players.size, backends[1]!.players.size]).toEqual([8, 8])
  })

  it("connect_max_attempts bounds the addresses tried, on every worker", async () => {
    const dead = await Promise.all(
      Array.from(
        { length: 4 },
        () =>
          new Promise<number>((resolve) => {
            const server = net.createServer().listen(0, "127.0.0.1", () => {
              const { port } = server.address() as net.AddressInfo
              server.close(() => resolve(port))
            })
          })
      )
    )
    const dir = makeConfigDir(`${TWO_WORKERS}\nconnect_max_attempts = 2`, {
      "down.toml": `domains = ["down.example.com"]\naddresses = [${dead.map((port) => `"127.0.0.1:${port}"`).join(", ")}]`
    })
    const portal = await startPortal(dir.configFile)
    await joinMany(portal.port, 6, "down.example.com")
    // Worker log lines reach the main thread's logger a moment after the player was told.
    const failures = await waitFor(() => {
      const lines = portal.logs.filter((line) => /could not join down: no address of server down answered/.test(line))
      return lines.length === 6 ? lines : undefined
    })
    for (const line of failures) expect(line.match(/ECONNREFUSED/g)).toHaveLength(2)
  })

  it("a ban reaches every worker: online players it matches are removed, and new logins refused", async () => {
    const { portal, backend } = await setup("", "", { hold: true })
    await joinMany(portal.port, 8)
    expect(backend.players.size).toBe(8)
    await portal.run(Effect.flatMap(BanStore, (bans) => bans.add({ target: { type: "ip", value: "127.0.0.1" }, reason: "test", source: "test" })))
    await waitFor(() => backend.players.size === 0, { what: "every banned player to be removed", timeoutMs: 3000 })
    const after = await join(portal.port, "mc.example.com", { username: "late" })
    expect(after._tag === "Kicked" && after.reason).toMatch(/banned/)
    // Workers are sent what changed: a ban given new terms, then lifted, reaches both of them too.
    await portal.run(Effect.flatMap(BanStore, (bans) => bans.add({ target: { type: "ip", value: "127.0.0.1" }, reason: "new terms", source: "test" })))
    await waitFor(async () => {
      const results = await Promise.all(Array.from({ length: 4 }, (_, i) => join(portal.port, "mc.example.com", { username: `terms${i}` })))
      return results.every((result) => result._tag === "Kicked" && /new terms/.test(result.reason)) || undefined
    }, { what: "the new terms on every worker", timeoutMs: 3000 })
    await portal.run(Effect.flatMap(BanStore, (bans) => bans.remove({ type: "ip", value: "127.0.0.1" }, "test")))
    await waitFor(async () => {
      const results = await Promise.all(Array.from({ length: 4 }, (_, i) => join(portal.port, "mc.example.com", { username: `back${i}` })))
      return results.every((result) => result._tag === "Joined") || undefined
    }, { what: "logins on every worker once the ban is lifted", timeoutMs: 3000 })
  })

  it("a kick from the main thread reaches the worker that holds the player", async () => {
    const { portal, backend } = await setup("", "", { hold: true })
    await joinMany(portal.port, 6)
    await waitFor(async () => (await registry(portal, (r) => r.total)) === 6, { what: "six players listed" })
    const kicked = await registry(portal, (r) => r.endWhere(() => true, "maintenance"))
    expect(kicked).toBe(6)
    await waitFor(() => backend.players.size === 0, { what: "every player to be gone" })
    await waitFor(async () => (await registry(portal, (r) => r.total)) === 0, { what: "the registry to be empty" })
  })

  it("a server file change reaches both workers within a second", async () => {
    const { portal, dir } = await setup("")
    const other = await startBackend("other")
    dir.write("servers/other.toml", `domains = ["other.example.com"]\naddresses = ["127.0.0.1:${other.port}"]`)
    const started = Date.now()
    await waitFor(async () => (await pingMany(portal.port, 1, "other.example.com"))[0] === "motd of other", {
      what: "the new server",
      timeoutMs: 3000
    })
    expect(Date.now() - started).toBeLessThan(1500)
    // Both workers route it.
    expect(await pingMany(portal.port, 12, "other.example.com")).toEqual(Array.from({ length: 12 }, () => "motd of other"))
  })

  it("pings are answered in the workers from what the main thread's cache gave them, every one counted; a configuration change shows at once", async () => {
    const { portal, backend, dir } = await setup(`[status_cache]\nttl = "1m"`)
    expect(await pingMany(portal.port, 12)).toEqual(Array.from({ length: 12 }, () => "motd of main0"))
    // One backend request for all of them, and each ping counted once: a hit, or a miss that waited on the fetch.
    expect(backend.handshakes).toHaveLength(1)
    const counted = (await portal.run(statsSnapshot)).statusCache
    expect(counted.hits + counted.misses).toBe(12)
    expect(counted.hits).toBeGreaterThan(0)
    dir.write("servers/main.toml", `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\n[motd.online]\ntext = "changed"`)
    const started = Date.now()
    await waitFor(async () => (await pingMany(portal.port, 1))[0] === "changed", { what: "the new MOTD", timeoutMs: 3000 })
    expect(Date.now() - started).toBeLessThan(1500)
    expect(await pingMany(portal.port, 12)).toEqual(Array.from({ length: 12 }, () => "changed"))
    expect(backend.handshakes).toHaveLength(1)
  })

  it("a worker that crashes is replaced at once; the other worker's players stay", async () => {
    const { portal, backend } = await setup("", "", { hold: true })
    const results = await joinMany(portal.port, 10)
    expect(results.every((result) => result._tag === "Joined")).toBe(true)
    await waitFor(async () => (await registry(portal, (r) => r.total)) === 10, { what: "ten players listed" })
    const onWorker2 = (await registry(portal, (r) => r.list)).length - portal.logs.filter((line) => /joined main via .*worker=1$/.test(line)).length
    // Bytes moved so far, as the admin API counts them: ended sessions' from Stats, live ones' from the registry
    // (refreshed from the workers every 2 s).
    const movedIn = async () =>
      (await portal.run(statsSnapshot)).bytes.in + (await registry(portal, (r) => r.list)).reduce((sum, session) => sum + session.bytesIn, 0)
    await waitFor(async () => (await registry(portal, (r) => r.list)).every((session) => session.bytesIn > 0), { what: "byte counts of every player" })
    const before = await movedIn()
    await portal.run(Effect.flatMap(WorkerPool, (pool) => pool.crash(1)) as Effect.Effect<void>)
    // Like every other line of a worker, these carry its index.
    const stopped = await portal.waitForLog(/worker 1 stopped unexpectedly.* worker=1$/)
    // What it gave back, by the limit each was held under: in passthrough its players held a connection, a place
    // and a session count on its backend address each, and no packet-mode claim.
    const held = portal.logs.filter((line) => /joined main via .*worker=1$/.test(line)).length
    expect(stopped).toContain(
      `gave back ${held} connection(s), ${held} player place(s), ${held} backend session count(s), 0 handshake(s), 0 packet-mode player claim(s))`
    )
    await portal.waitForLog(/worker 1 replaced.* worker=1$/, 3000)
    // The crashed worker's players are gone; the other's are all still there.
    await waitFor(() => backend.players.size === onWorker2, { what: "only worker 2's players to remain" })
    await waitFor(async () => (await registry(portal, (r) => r.total)) === onWorker2, { what: "the registry to drop worker 1's players" })
    // The new worker serves: every connection is answered, and places the dead worker held were given back.
    expect(await pingMany(portal.port, 12)).toEqual(Array.from({ length: 12 }, () => "motd of main0"))
    expect(workersThatLogged(portal.logs, /joined main via/)).toContain("1")
    // The connections the dead worker had open are not counted as active any more: only worker 2's players are.
    await waitFor(async () => (await portal.run(statsSnapshot)).connections.active === onWorker2, { what: "the active count of worker 2's players" })
    // The dead worker's sessions ended with what they had moved: the total never goes down.
    expect(await movedIn()).toBeGreaterThanOrEqual(before)
  })

  it("a worker's replacement goes on with its connection ids: no id is given twice", async () => {
    const { portal } = await setup("", "", { hold: true })
    const joinedIds = () => portal.logs.filter((line) => /joined main via/.test(line)).map((line) => /conn=(\d+)/.exec(line)?.[1])
    await joinMany(portal.port, 8)
    expect(workersThatLogged(portal.logs, /joined main via/)).toContain("1")
    await portal.run(Effect.flatMap(WorkerPool, (pool) => pool.crash(1)) as Effect.Effect<void>)
    await portal.waitForLog(/worker 1 replaced/, 3000)
    const replacedAt = portal.logs.length
    const newWorker1Joins = () => portal.logs.slice(replacedAt).filter((line) => /joined main via .*worker=1$/.test(line)).length
    // Logins from other addresses until the new worker 1 has taken some (the kernel spreads them by address).
    for (let i = 0; i < 8 && newWorker1Joins() === 0; i++) {
      await Promise.all(Array.from({ length: 4 }, (_, k) => join(portal.port, "mc.example.com", { username: `n${i}${k}`, localAddress: `127.0.0.${10 + i * 4 + k}` })))
      await waitFor(() => portal.logs.slice(replacedAt).filter((line) => /joined main via/.test(line)).length >= (i + 1) * 4 || undefined)
    }
    expect(newWorker1Joins()).toBeGreaterThan(0)
    const ids = joinedIds()
    expect(new Set(ids).size).toBe(ids.length)
  })

  it("a place whose workers keep stopping soon after their start is filled again after a pause that grows", { timeout: 20_000 }, async () => {
    const { portal } = await setup("")
    const crash = () => portal.run(Effect.flatMap(WorkerPool, (pool) => pool.crash(1)) as Effect.Effect<void>)
    /** The index of the first line from `from` on that matches. */
    const lineOf = (pattern: RegExp, from: number) => {
      const at = portal.logs.findIndex((line, index) => index >= from && pattern.test(line))
      return at < 0 ? undefined : at
    }
    // The first stop is replaced at once, however soon after its start it came.
    await crash()
    await portal.waitForLog(/worker 1 stopped unexpectedly \(exit code 1\); replacing it \(gave back/)
    await portal.waitForLog(/worker 1 replaced/, 3000)
    // Crashed right after each replacement, the place's workers stop soon after their start again and again: the
    // next replacements wait 1 s, then 2 s. (Had the first worker run 10 s, the next stop would still come at once.)
    const pauses: Array<number> = []
    for (let n = 0; n < 3 && pauses.length < 2; n++) {
      const from = portal.logs.length
      await crash()
      const stoppedAt = await waitFor(() => lineOf(/worker 1 stopped unexpectedly/, from), { what: "the stop" })
      const line = portal.logs[stoppedAt]!
      const replacedAt = await waitFor(() => lineOf(/worker 1 replaced/, from), { timeoutMs: 8000, what: "the replacement" })
      const [stopped, replaced] = [portal.logTimes[stoppedAt]!, portal.logTimes[replacedAt]!]
      const said = /replacing it in (\d+)s \(it stopped (\d+) times in a row soon after its start\)/.exec(line)
      if (said === null) {
        expect(pauses, line).toEqual([])
        continue
      }
      pauses.push(Number(said[1]) * 1000)
      expect(replaced - stopped).toBeGreaterThanOrEqual(Number(said[1]) * 1000 - 50)
    }
    expect(pauses).toEqual([1000, 2000])
    // Meanwhile and after, the place serves again.
    expect(await pingMany(portal.port, 6)).toEqual(Array.from({ length: 6 }, () => "motd of main0"))
  })

  it("shutdown drains both workers: their players are let go and every worker stops", async () => {
    const { portal, backend } = await setup("", "", { hold: true })
    await joinMany(portal.port, 16)
    expect(workersThatLogged(portal.logs, /joined main via/)).toEqual(new Set(["1", "2"]))
    const threads = (await portal.run(Effect.flatMap(WorkerCensus, Ref.get) as unknown as Effect.Effect<ReadonlyArray<WorkerInfo>>)).map(
      (worker) => worker.threadId
    )
    expect(threads).toHaveLength(2)
    await portal.stop()
    await waitFor(() => backend.players.size === 0, { what: "every player to be let go" })
    expect(portal.logs.some((line) => /workers did not stop in time/.test(line))).toBe(false)
  })
})

describe("log lines", () => {
  it("a session's lines have the connection's fields first and in one order, on one thread as on workers", async () => {
    for (const threads of [1, 2]) {
      const backend = await startBackend("main", { hold: true })
      const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = ${threads}`, {
        "main.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
      })
      const portal = await startPortal(dir.configFile)
      const player = await join(portal.port, "mc.example.com", { username: "Order" })
      if (player._tag === "Joined") player.leave()
      const worker = threads === 1 ? "" : " worker=[12]"
      const fields = new RegExp(` conn=\\d+ ip=127\\.0\\.0\\.1 server=main${worker}$`)
      expect(await portal.waitForLog(/Order .*joined main/)).toMatch(fields)
      // The "left" line is written after the connection's fiber has ended, by the relay.
      expect(await portal.waitForLog(/Order .*left main/)).toMatch(fields)
      await portal.stop()
    }
  })

  it("a worker's line has the time it was logged at, however late the main thread writes it", async () => {
    const { portal } = await setup("", "", { hold: true })
    const player = await join(portal.port, "mc.example.com", { username: "Late" })
    expect(player._tag).toBe("Joined")
    await waitFor(async () => (await registry(portal, (r) => r.total)) === 1, { what: "the player listed" })
    // A kick reaches the worker at once (a message); it logs "left" while the main thread (this one) is busy.
    const leftAt = Date.now()
    const kicked = registry(portal, (r) => r.endWhere(() => true, "bye"))
    while (Date.now() - leftAt < 400) {
      // busy
    }
    expect(await kicked).toBe(1)
    await portal.waitForLog(/Late .*left main/)
    const index = portal.logs.findIndex((line) => /Late .*left main/.test(line))
    expect(portal.logTimes[index]! - leftAt).toBeLessThan(200)
  })
})

describe("listening", () => {
  it("a port something already listens on is refused at start, with so_reuseport as without", async () => {
    const port = await freePort()
    const first = await startPortal(makeConfigDir(`bind = "127.0.0.1:${port}"\nworker_threads = 2\nso_reuseport = true`).configFile)
    expect(first.port).toBe(port)
    for (const reuse of [true, false]) {
      const second = makeConfigDir(`bind = "127.0.0.1:${port}"\nworker_threads = 2\nso_reuseport = ${reuse}`)
      await expect(startPortal(second.configFile)).rejects.toThrow(/the address is already in use/)
    }
    // Nothing of the refused starts took players from the first.
    expect(reasonText((await ping(port, "anything.example.com")).description)).toMatch(/No server answers/)
  })

  it("at shutdown, connections to the shared socket are refused at once, not left waiting for the drain", async () => {
    const backend = await startBackend("main", { hold: true })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 2`, {
      "main.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const grace = process.env.PORTAL_SHUTDOWN_GRACE_MS
    process.env.PORTAL_SHUTDOWN_GRACE_MS = "3000"
    try {
      const portal = await startPortal(dir.configFile)
      await joinMany(portal.port, 2)
      const stopped = portal.stop()
      await new Promise((resolve) => setTimeout(resolve, 300))
      const started = Date.now()
      const outcome = await new Promise<string>((resolve) => {
        const socket = net.connect(portal.port, "127.0.0.1")
        socket.on("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"))
        socket.on("close", () => resolve("closed"))
        socket.setTimeout(2000, () => {
          socket.destroy()
          resolve("left waiting")
        })
      })
      expect(outcome).toBe("ECONNREFUSED")
      expect(Date.now() - started).toBeLessThan(1000)
      await stopped
    } finally {
      if (grace === undefined) delete process.env.PORTAL_SHUTDOWN_GRACE_MS
      else process.env.PORTAL_SHUTDOWN_GRACE_MS = grace
    }
  })

  it("an IPv6 bind with a zone id works with workers as on one thread, with so_reuseport as without", async () => {
    // `::1%lo` stands for a link-local address with its interface (`fe80::1%eth0`): loopback has no link-local one.
    for (const reuse of [true, false]) {
      const portal = await startPortal(makeConfigDir(`bind = "[::1%lo]:0"\nworker_threads = 2\nso_reuseport = ${reuse}`).configFile)
      await portal.waitForLog(/listening on \[::1%lo\]:\d+ with 2 worker threads/)
      const answers = await Promise.all(
        Array.from({ length: 4 }, () => ping(portal.port, "anything.example.com", "1.20.4", undefined, "::1").then((answer) => reasonText(answer.description)))
      )
      expect(answers.every((text) => /No server answers/.test(text))).toBe(true)
      await portal.stop()
    }
  })

  it("without so_reuseport the workers share one socket, and both accept", async () => {
    const backend = await startBackend("main", { hold: true })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 2`, {
      "main.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    await portal.waitForLog(/listening on 127\.0\.0\.1:\d+ with 2 worker threads: the workers share one listening socket/)
    await joinMany(portal.port, 12)
    expect(backend.players.size).toBe(12)
  })

  it("with so_reuseport each worker has its own socket; where SO_REUSEPORT is unavailable, Portal says so and shares one", async () => {
    const dir = makeConfigDir(`${TWO_WORKERS}`)
    const portal = await startPortal(dir.configFile)
    await portal.waitForLog(/with 2 worker threads: each worker listens on 127\.0\.0\.1:\d+ with its own socket \(SO_REUSEPORT\)/)
    await portal.stop()
    process.env.PORTAL_TEST_NO_REUSEPORT = "1"
    try {
      const fallback = await startPortal(dir.configFile)
      await fallback.waitForLog(/so_reuseport is not available here .*; the workers share one listening socket/)
      await fallback.waitForLog(/the workers share one listening socket/)
      expect(reasonText((await ping(fallback.port, "anything.example.com")).description)).toMatch(/No server answers/)
    } finally {
      delete process.env.PORTAL_TEST_NO_REUSEPORT
    }
  })
})
