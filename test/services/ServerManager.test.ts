/**
 * ServerManager with an in-memory provider and TestClock: wake on join, single start, start timeout, idle
 * shutdown with a real PlayerRegistry, offline providers, stopping then starting, the changes stream, reloads.
 */
import { NodeContext } from "@effect/platform-node"
import { FetchHttpClient } from "@effect/platform"
import { it } from "@effect/vitest"
import { Chunk, Clock, Duration, Effect, Either, Exit, Fiber, Layer, Queue, Schema, Scope, Stream, SubscriptionRef, TestClock } from "effect"
import { describe, expect } from "vitest"
import { decodeServerText } from "../../src/schema/decode.js"
import { GlobalConfig } from "../../src/schema/GlobalConfig.js"
import { ConfigStore, type ConfigSnapshot } from "../../src/services/ConfigStore.js"
import { type Observation, ProviderError, type Provider, type ProviderInput } from "../../src/services/manager/Provider.js"
import { initialStatus, step } from "../../src/services/manager/stateMachine.js"
import { Balancer } from "../../src/services/Balancer.js"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"
import {
  type MakeProvider,
  ServerManager,
  type ServerManagerOptions,
  type StateChange,
  WAKE_WAIT,
  WAKE_WAIT_ENV
} from "../../src/services/ServerManager.js"

const snapshotOf = (servers: Record<string, string>): ConfigSnapshot => ({
  configFile: "/etc/portal/proxy.toml",
  global: Schema.decodeUnknownSync(GlobalConfig)({}),
  servers: new Map(
    Object.entries(servers).map(([id, body]) => [id, Either.getOrThrow(decodeServerText(`/srv/${id}.toml`, `${id}.toml`, body))])
  ),
  revision: 1
})

const LOCAL = (extra = "") => `addresses = ["127.0.0.1:25566"]\n[server_manager]\ntype = "local"\ncommand = "java"\nworking_dir = "/srv/mc"\n${extra}`
const PANEL = (extra = "") =>
  `addresses = ["127.0.0.1:25567"]\n[server_manager]\ntype = "panel"\napi_url = "http://127.0.0.1:1"\napi_key = "k"\nserver_id = "s"\n${extra}`

interface FakeBehaviour {
  initial?: Observation
  /** Time from a start request to the ready report; "never" for a server that never gets ready. */
  readyAfter?: Duration.DurationInput | "never"
  /** Time from a stop request to the stopped report. */
  stopAfter?: Duration.DurationInput
  startError?: ProviderError
}

interface FakeServer {
  starts: number
  stops: number
  aborts: number
  readonly input: ProviderInput
  readonly report: (observation: Observation) => Effect.Effect<void>
}

/** A provider that only exists in memory; its timing runs on the Clock (so on TestClock here). */
const fakeProviders = (behaviours: Record<string, FakeBehaviour>) => {
  const servers = new Map<string, FakeServer>()
  const created: Array<string> = []
  const make: MakeProvider = (input) =>
    Effect.gen(function* () {
      const scope = yield* Effect.scope
      const behaviour = behaviours[input.serverId] ?? {}
      const fake: FakeServer = { starts: 0, stops: 0, aborts: 0, input, report: input.report }
      servers.set(input.serverId, fake)
      created.push(input.serverId)
      const provider: Provider = {
        initial: Effect.succeed(behaviour.initial ?? { _tag: "Stopped", requested: true, detail: "not started yet" }),
        watch: Effect.void,
        start: Effect.suspend(() => {
          fake.starts += 1
          if (behaviour.startError !== undefined) return Effect.fail(behaviour.startError)
          const readyAfter = behaviour.readyAfter ?? Duration.seconds(2)
          if (readyAfter === "never") return Effect.void
          return Effect.asVoid(
            Effect.forkIn(Effect.sleep(readyAfter).pipe(Effect.zipRight(input.report({ _tag: "Running", detail: "fake ready" }))), scope)
          )
        }),
        stop: Effect.suspend(() => {
          fake.stops += 1
          return Effect.asVoid(
            Effect.forkIn(
              Effect.sleep(behaviour.stopAfter ?? Duration.seconds(1)).pipe(
                Effect.zipRight(input.report({ _tag: "Stopped", requested: true, detail: "fake stopped" }))
              ),
              scope
            )
          )
        }),
        abort: Effect.sync(() => {
          fake.aborts += 1
        })
      }
      return provider
    })
  return {
    make,
    created,
    get: (id: string) => {
      const fake = servers.get(id)
      if (fake === undefined) throw new Error(`no provider for ${id}`)
      return fake
    }
  }
}

const managerLayer = (snapshot: ConfigSnapshot, make: MakeProvider, options: ServerManagerOptions = {}) =>
  ServerManager.Default({ makeProvider: make, ...options }).pipe(
    Layer.provideMerge(Layer.mergeAll(ConfigStore.layerStatic(snapshot), PlayerRegistry.Default, NodeContext.layer, FetchHttpClient.layer))
  )

const transitions = (changes: Iterable<StateChange>) => [...changes].map((change) => `${change.serverId}: ${change.from} -> ${change.to}`)

/** Registers a player on `serverId` until the returned scope is closed. */
const playerOn = (serverId: string, id: number) =>
  Effect.gen(function* () {
    const registry = yield* PlayerRegistry
    const scope = yield* Scope.make()
    yield* Effect.acquireRelease(
      Effect.map(Clock.currentTimeMillis, (since) =>
        registry.dataPlane.admit(
          Either.getOrThrow(decodeServerText(`${serverId}.toml`, `${serverId}.toml`, `addresses = ["127.0.0.1:1"]`)),
          { id, serverId, clientAddress: "127.0.0.1", clientPort: 40000 + id, protocolVersion: 765, name: `p${id}`, uuid: undefined },
          since
        )!
      ),
      (lease) => Effect.sync(lease.release)
    ).pipe(Scope.extend(scope))
    return scope
  })

describe("ServerManager", () => {
  it.scoped("a join wakes a sleeping server: sleeping -> starting -> online", () => {
    const fakes = fakeProviders({ lobby: { readyAfter: "2 seconds" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      const changes = yield* manager.subscribe
      expect(yield* manager.stateOf("lobby")).toBe("sleeping")
      const join = yield* Effect.fork(manager.ensureOnline("lobby"))
      yield* TestClock.adjust("1 second")
      expect(yield* manager.stateOf("lobby")).toBe("starting")
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(join)).toEqual({ _tag: "Online" })
      expect(yield* manager.stateOf("lobby")).toBe("online")
      const seen = yield* Queue.takeAll(changes)
      expect(transitions(seen)).toEqual(["lobby: sleeping -> starting", "lobby: starting -> online"])
      expect(Chunk.toReadonlyArray(seen)[1]!.reason).toBe("fake ready")
      expect(fakes.get("lobby").starts).toBe(1)
      // Already online: no new start.
      expect(yield* manager.ensureOnline("lobby")).toEqual({ _tag: "Online" })
      expect(fakes.get("lobby").starts).toBe(1)
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL() }), fakes.make)))
  })

  it.scoped("20 concurrent joins cause exactly one start", () => {
    const fakes = fakeProviders({ lobby: { readyAfter: "3 seconds" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      const joins = yield* Effect.fork(
        Effect.forEach(Array.from({ length: 20 }), () => manager.ensureOnline("lobby"), { concurrency: "unbounded" })
      )
      yield* TestClock.adjust("3 seconds")
      const results = yield* Fiber.join(joins)
      expect(results).toHaveLength(20)
      expect(results.every((result) => result._tag === "Online")).toBe(true)
      expect(fakes.get("lobby").starts).toBe(1)
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL() }), fakes.make)))
  })

  it.scoped("a server not ready within WAKE_WAIT answers Starting; past start_timeout it is crashed and aborted", () => {
    const fakes = fakeProviders({ lobby: { readyAfter: "never" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      const changes = yield* manager.subscribe
      const join = yield* Effect.fork(manager.ensureOnline("lobby"))
      yield* TestClock.adjust("24 seconds")
      expect(join.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(join)).toEqual({ _tag: "Starting" })
      expect(yield* manager.stateOf("lobby")).toBe("starting")
      // A second player during the start waits again, without a second start.
      yield* TestClock.adjust("15 seconds")
      const second = yield* Effect.fork(manager.ensureOnline("lobby"))
      yield* TestClock.adjust("20 seconds") // 60 s after the start request: start_timeout
      expect(yield* Fiber.join(second)).toEqual({ _tag: "Unavailable", state: "crashed", reason: "not ready within 1m" })
      expect(yield* manager.stateOf("lobby")).toBe("crashed")
      expect(fakes.get("lobby").aborts).toBe(1)
      expect(fakes.get("lobby").starts).toBe(1)
      expect(transitions(yield* Queue.takeAll(changes))).toEqual(["lobby: sleeping -> starting", "lobby: starting -> crashed"])
      // A crashed server is started again by the next join.
      const third = yield* Effect.fork(manager.ensureOnline("lobby"))
      yield* TestClock.adjust("1 second")
      expect(fakes.get("lobby").starts).toBe(2)
      expect(yield* manager.stateOf("lobby")).toBe("starting")
      yield* Fiber.interrupt(third)
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL() }), fakes.make)))
  })

  it.scoped("a join after a panel's start timed out waits for that start again, without a second start command", () => {
    const fakes = fakeProviders({ lobby: { readyAfter: "never" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      const first = yield* Effect.fork(manager.ensureOnline("lobby"))
      yield* TestClock.adjust("1 second")
      yield* fakes.get("lobby").report({ _tag: "Starting", detail: "panel: starting" })
      yield* TestClock.adjust("10 seconds")
      expect(yield* Fiber.join(first)).toEqual({ _tag: "Unavailable", state: "crashed", reason: "not ready within 10s" })
      expect(fakes.get("lobby").aborts).toBe(1)
      // The panel is still starting it; a join waits for that start, and gets in once the panel says running.
      const second = yield* Effect.fork(manager.ensureOnline("lobby"))
      yield* TestClock.adjust("1 second")
      expect(yield* manager.stateOf("lobby")).toBe("starting")
      expect(fakes.get("lobby").starts).toBe(1)
      yield* fakes.get("lobby").report({ _tag: "Running", detail: "panel: running" })
      expect(yield* Fiber.join(second)).toEqual({ _tag: "Online" })
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: PANEL(`start_timeout = "10s"`) }), fakes.make)))
  })

  it.scoped("the wait bound can be set by the layer options", () => {
    const fakes = fakeProviders({ lobby: { readyAfter: "never" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      expect(Duration.toMillis(manager.wakeWait)).toBe(5000)
      const join = yield* Effect.fork(manager.ensureOnline("lobby"))
      yield* TestClock.adjust("5 seconds")
      expect(yield* Fiber.join(join)).toEqual({ _tag: "Starting" })
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL() }), fakes.make, { wakeWait: "5 seconds" })))
  })

  it.scoped("the wait bound can be set with PORTAL_WAKE_WAIT_MS", () => {
    const fakes = fakeProviders({})
    const wakeWaitMillis = Effect.map(ServerManager, (manager) => Duration.toMillis(manager.wakeWait)).pipe(
      Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL() }), fakes.make))
    )
    return Effect.gen(function* () {
      const before = process.env[WAKE_WAIT_ENV]
      process.env[WAKE_WAIT_ENV] = "3000"
      const restore = Effect.sync(() => {
        if (before === undefined) delete process.env[WAKE_WAIT_ENV]
        else process.env[WAKE_WAIT_ENV] = before
      })
      expect(yield* wakeWaitMillis.pipe(Effect.ensuring(restore))).toBe(3000)
      expect(yield* wakeWaitMillis).toBe(before === undefined ? Duration.toMillis(WAKE_WAIT) : Number(before))
    })
  })

  it.scoped("idle shutdown stops an online server after shutdown_after without players", () => {
    const fakes = fakeProviders({ lobby: { initial: { _tag: "Running", detail: "already up" }, stopAfter: "2 seconds" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      const changes = yield* manager.subscribe
      expect(yield* manager.stateOf("lobby")).toBe("online")
      yield* TestClock.adjust("55 seconds")
      expect(yield* manager.stateOf("lobby")).toBe("online")
      yield* TestClock.adjust("6 seconds")
      expect(yield* manager.stateOf("lobby")).toBe("stopping")
      expect(fakes.get("lobby").stops).toBe(1)
      yield* TestClock.adjust("2 seconds")
      expect(yield* manager.stateOf("lobby")).toBe("sleeping")
      const seen = Chunk.toReadonlyArray(yield* Queue.takeAll(changes))
      expect(transitions(seen)).toEqual(["lobby: online -> stopping", "lobby: stopping -> sleeping"])
      expect(seen[0]!.reason).toBe("no players for 1m")
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL(`shutdown_after = "1m"`) }), fakes.make)))
  })

  it.scoped("a player keeps the server up, and a player arriving resets the idle timer", () => {
    const fakes = fakeProviders({ lobby: { initial: { _tag: "Running", detail: "already up" } } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      // Online with a player for 3 minutes: never stopped.
      const first = yield* playerOn("lobby", 1)
      yield* TestClock.adjust("3 minutes")
      expect(yield* manager.stateOf("lobby")).toBe("online")
      yield* Scope.close(first, Exit.void)
      // 40 s idle, then a player for 10 s, then idle again: the minute counts from when the player was last seen.
      yield* TestClock.adjust("40 seconds")
      const second = yield* playerOn("lobby", 2)
      yield* TestClock.adjust("10 seconds")
      yield* Scope.close(second, Exit.void)
      yield* TestClock.adjust("50 seconds")
      expect(yield* manager.stateOf("lobby")).toBe("online")
      expect(fakes.get("lobby").stops).toBe(0)
      yield* TestClock.adjust("15 seconds")
      expect(yield* manager.stateOf("lobby")).not.toBe("online")
      expect(fakes.get("lobby").stops).toBe(1)
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL(`shutdown_after = "1m"`) }), fakes.make)))
  })

  it.scoped("a player who leaves just after a check is given the whole of shutdown_after, never less", () => {
    const fakes = fakeProviders({ lobby: { initial: { _tag: "Running", detail: "already up" } } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      // Checks run every 5 s; the player is seen by the check at 20 s and leaves at 24 s, just before the next.
      const player = yield* playerOn("lobby", 1)
      yield* TestClock.adjust("24 seconds")
      yield* Scope.close(player, Exit.void)
      // 60 s after the leave (84 s): a check counting from the last one that saw the player (20 s) would stop it.
      yield* TestClock.adjust("60 seconds")
      expect(yield* manager.stateOf("lobby")).toBe("online")
      expect(fakes.get("lobby").stops).toBe(0)
      // Within one more check interval it stops.
      yield* TestClock.adjust("6 seconds")
      expect(fakes.get("lobby").stops).toBe(1)
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL(`shutdown_after = "1m"`) }), fakes.make)))
  })

  it.scoped("a server that comes online is trusted by the balancer until its next health probe", () => {
    const fakes = fakeProviders({ lobby: { readyAfter: "1 second" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      const balancer = yield* Balancer
      const server = (yield* Effect.flatMap(ConfigStore, (store) => store.get)).servers.get("lobby")!
      // Probes made while it slept found nobody listening.
      yield* balancer.setHealth(server, server.config.addresses[0]!, false)
      expect(yield* balancer.anyHealthy(server)).toBe(false)
      const joining = yield* Effect.fork(manager.ensureOnline("lobby"))
      yield* TestClock.adjust("2 seconds")
      expect(yield* Fiber.join(joining)).toEqual({ _tag: "Online" })
      expect(yield* balancer.anyHealthy(server)).toBe(true)
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL() }), fakes.make).pipe(Layer.provideMerge(Balancer.Default))))
  })

  it.scoped("a join counts as activity before the registry lists the player", () => {
    const fakes = fakeProviders({ lobby: { initial: { _tag: "Running", detail: "already up" } } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      // Idle for 59 s; then a join is asked for (a worker's player, not listed in this registry yet).
      yield* TestClock.adjust("59 seconds")
      expect(yield* manager.ensureOnline("lobby")).toEqual({ _tag: "Online" })
      yield* TestClock.adjust("30 seconds")
      expect(yield* manager.stateOf("lobby")).toBe("online")
      // A minute after the join with nobody listed, it stops.
      yield* TestClock.adjust("35 seconds")
      expect(yield* manager.stateOf("lobby")).not.toBe("online")
      expect(fakes.get("lobby").stops).toBe(1)
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL(`shutdown_after = "1m"`) }), fakes.make)))
  })

  it.scoped("without shutdown_after an idle server stays online", () => {
    const fakes = fakeProviders({ lobby: { initial: { _tag: "Running", detail: "already up" } } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      yield* TestClock.adjust("2 hours")
      expect(yield* manager.stateOf("lobby")).toBe("online")
      expect(fakes.get("lobby").stops).toBe(0)
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL() }), fakes.make)))
  })

  it.scoped("idle time and the wake wait run on the monotonic clock: a wall clock stepped forward cuts neither", () => {
    const fakes = fakeProviders({
      lobby: { initial: { _tag: "Running", detail: "already up" }, stopAfter: "2 seconds", readyAfter: "1 second" }
    })
    // TestClock, except that its wall time can be stepped on its own, as an NTP step or an operator would. It stays
    // a TestClock underneath (TestClock.adjust looks the clock up in the fiber's services).
    let step = 0
    const stepped = Effect.map(
      TestClock.testClock(),
      (test): TestClock.TestClock =>
        Object.assign(Object.create(test) as TestClock.TestClock, {
          unsafeCurrentTimeMillis: () => test.unsafeCurrentTimeMillis() + step,
          currentTimeMillis: Effect.sync(() => test.unsafeCurrentTimeMillis() + step),
          unsafeCurrentTimeNanos: () => test.unsafeCurrentTimeNanos(),
          currentTimeNanos: test.currentTimeNanos
        })
    )
    const hour = 3_600_000
    return Effect.gen(function* () {
      const clock = yield* stepped
      yield* Effect.gen(function* () {
        const manager = yield* ServerManager
        yield* TestClock.adjust("30 seconds")
        step += hour
        // 35 s without players by the monotonic clock (an hour more by the wall clock): shutdown_after is 1m.
        yield* TestClock.adjust("5 seconds")
        expect(yield* manager.stateOf("lobby")).toBe("online")
        expect(fakes.get("lobby").stops).toBe(0)
        // The idle check at 60 s stops it; a player joins while it is stopping, and the wall clock jumps again.
        yield* TestClock.adjust("26 seconds")
        expect(yield* manager.stateOf("lobby")).toBe("stopping")
        const join = yield* Effect.fork(manager.ensureOnline("lobby"))
        yield* TestClock.adjust("10 millis")
        step += hour
        // Stopped at 62 s and started again, ready 1 s later: within the 5 s wake wait, so the player gets in.
        yield* TestClock.adjust("1 second")
        expect(yield* manager.stateOf("lobby")).toBe("starting")
        expect(join.unsafePoll()).toBeNull()
        yield* TestClock.adjust("1 second")
        expect(yield* Fiber.join(join)).toEqual({ _tag: "Online" })
        expect(fakes.get("lobby").starts).toBe(1)
      }).pipe(
        Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL(`shutdown_after = "1m"`) }), fakes.make, { wakeWait: "5 seconds" })),
        Effect.withClock(clock)
      )
    })
  })

  it.scoped("an offline provider makes joins Unavailable and starts nothing", () => {
    const refused = new ProviderError({ reason: "unauthorized", status: 401, message: "the panel API refused the API key (HTTP 401)" })
    const fakes = fakeProviders({ lobby: { initial: { _tag: "Failed", error: refused } } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      expect(yield* manager.stateOf("lobby")).toBe("offline")
      expect(yield* manager.ensureOnline("lobby")).toEqual({
        _tag: "Unavailable",
        state: "offline",
        reason: "the panel API refused the API key (HTTP 401)"
      })
      expect(fakes.get("lobby").starts).toBe(0)
      // When the API answers again the server is usable.
      yield* fakes.get("lobby").report({ _tag: "Stopped", requested: false, detail: "the panel reports offline" })
      expect(yield* manager.stateOf("lobby")).toBe("sleeping")
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: PANEL() }), fakes.make)))
  })

  it.scoped("a start the provider refuses: API errors make the server offline, spawn errors crashed", () => {
    const fakes = fakeProviders({
      remote: { startError: new ProviderError({ reason: "http_status", status: 500, message: "the panel API answered HTTP 500" }) },
      local: { startError: new ProviderError({ reason: "spawn", message: 'command "java" was not found' }) }
    })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      expect(yield* manager.ensureOnline("remote")).toEqual({
        _tag: "Unavailable",
        state: "offline",
        reason: "start failed: the panel API answered HTTP 500"
      })
      expect(yield* manager.ensureOnline("local")).toEqual({ _tag: "Unavailable", state: "crashed", reason: 'command "java" was not found' })
      expect(fakes.get("local").starts).toBe(1)
    }).pipe(Effect.provide(managerLayer(snapshotOf({ remote: PANEL(), local: LOCAL() }), fakes.make)))
  })

  it.scoped("a join during a stop waits for the stop to finish, then starts the server", () => {
    const fakes = fakeProviders({ lobby: { initial: { _tag: "Running", detail: "up" }, stopAfter: "10 seconds", readyAfter: "2 seconds" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      const changes = yield* manager.subscribe
      yield* TestClock.adjust("65 seconds")
      expect(yield* manager.stateOf("lobby")).toBe("stopping")
      const join = yield* Effect.fork(manager.ensureOnline("lobby"))
      yield* TestClock.adjust("10 seconds")
      yield* TestClock.adjust("2 seconds")
      expect(yield* Fiber.join(join)).toEqual({ _tag: "Online" })
      expect(transitions(yield* Queue.takeAll(changes))).toEqual([
        "lobby: online -> stopping",
        "lobby: stopping -> sleeping",
        "lobby: sleeping -> starting",
        "lobby: starting -> online"
      ])
      expect([fakes.get("lobby").stops, fakes.get("lobby").starts]).toEqual([1, 1])
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL(`shutdown_after = "1m"`) }), fakes.make)))
  })

  it.scoped("a stop that outlasts the wait: the join gets Starting and the server starts once the stop is done", () => {
    const fakes = fakeProviders({ lobby: { initial: { _tag: "Running", detail: "up" }, stopAfter: "40 seconds", readyAfter: "2 seconds" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      yield* TestClock.adjust("65 seconds")
      expect(yield* manager.stateOf("lobby")).toBe("stopping")
      const join = yield* Effect.fork(manager.ensureOnline("lobby"))
      yield* TestClock.adjust("25 seconds")
      expect(yield* Fiber.join(join)).toEqual({ _tag: "Starting" })
      expect(fakes.get("lobby").starts).toBe(0)
      yield* TestClock.adjust("20 seconds")
      expect(fakes.get("lobby").starts).toBe(1)
      yield* TestClock.adjust("2 seconds")
      expect(yield* manager.stateOf("lobby")).toBe("online")
    }).pipe(Effect.provide(managerLayer(snapshotOf({ lobby: LOCAL(`shutdown_after = "1m"`) }), fakes.make)))
  })

  it.scoped("the changes stream reports every transition in order to late subscribers", () => {
    const fakes = fakeProviders({ a: { readyAfter: "1 second" }, b: { readyAfter: "3 seconds" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      const collected = yield* Effect.fork(manager.changes.pipe(Stream.take(4), Stream.runCollect))
      yield* TestClock.adjust("10 millis") // lets the subscriber start
      const joins = yield* Effect.fork(Effect.all([manager.ensureOnline("a"), manager.ensureOnline("b")], { concurrency: 2 }))
      yield* TestClock.adjust("3 seconds")
      yield* Fiber.join(joins)
      const seen = Chunk.toReadonlyArray(yield* Fiber.join(collected))
      expect(transitions(seen)).toEqual(["a: sleeping -> starting", "b: sleeping -> starting", "a: starting -> online", "b: starting -> online"])
      expect(seen.map((change) => change.at)).toEqual([10, 10, 1010, 3010])
      expect(Object.fromEntries(yield* manager.states)).toEqual({ a: "online", b: "online" })
    }).pipe(Effect.provide(managerLayer(snapshotOf({ a: LOCAL(), b: LOCAL() }), fakes.make)))
  })

  it.scoped("servers without [server_manager] are online and not tracked", () => {
    const fakes = fakeProviders({})
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      expect(yield* manager.stateOf("plain")).toBe("online")
      expect(yield* manager.stateOf("nope")).toBe("online")
      expect(yield* manager.ensureOnline("plain")).toEqual({ _tag: "Online" })
      expect((yield* manager.states).size).toBe(0)
      expect(fakes.created).toEqual([])
    }).pipe(Effect.provide(managerLayer(snapshotOf({ plain: `addresses = ["127.0.0.1:25565"]` }), fakes.make)))
  })

  it.scoped("a join waiting on a start goes on at once when a reload re-tracks or drops the server's manager", () => {
    const fakes = fakeProviders({ a: { readyAfter: "never" }, b: { readyAfter: "never" } })
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      const store = yield* ConfigStore
      yield* SubscriptionRef.set(store.current, { ...snapshotOf({ a: LOCAL(), b: PANEL() }), revision: 2 })
      yield* TestClock.adjust("10 millis")
      const joinA = yield* Effect.fork(manager.ensureOnline("a"))
      const joinB = yield* Effect.fork(manager.ensureOnline("b"))
      yield* TestClock.adjust("1 second")
      expect(fakes.get("a").starts).toBe(1)
      // a's manager changes (tracked anew, with the new settings), b's is removed (a server like any other).
      yield* SubscriptionRef.set(store.current, { ...snapshotOf({ a: LOCAL(`start_timeout = "2m"`), b: `addresses = ["x:1"]` }), revision: 3 })
      yield* TestClock.adjust("10 millis")
      // b's player goes on at once; a's join starts the new entry (its own start) instead of waiting for nothing.
      expect(yield* Fiber.join(joinB)).toEqual({ _tag: "Online" })
      expect(fakes.created).toEqual(["a", "b", "a"])
      expect(fakes.get("a").starts).toBe(1)
      expect(yield* manager.stateOf("a")).toBe("starting")
      yield* Fiber.interrupt(joinA)
    }).pipe(Effect.provide(managerLayer(snapshotOf({ a: LOCAL() }), fakes.make)))
  })

  it.scoped("a reload adds, removes and re-tracks managed servers", () => {
    const fakes = fakeProviders({})
    return Effect.gen(function* () {
      const manager = yield* ServerManager
      const store = yield* ConfigStore
      expect(Object.fromEntries(yield* manager.states)).toEqual({ a: "sleeping" })
      yield* SubscriptionRef.set(store.current, { ...snapshotOf({ a: LOCAL(), b: PANEL() }), revision: 2 })
      yield* TestClock.adjust("10 millis")
      expect(Object.fromEntries(yield* manager.states)).toEqual({ a: "sleeping", b: "sleeping" })
      expect(fakes.created).toEqual(["a", "b"])
      // Changing a's manager re-creates its provider; removing b's stops tracking it.
      yield* SubscriptionRef.set(store.current, { ...snapshotOf({ a: LOCAL(`start_timeout = "2m"`), b: `addresses = ["x:1"]` }), revision: 3 })
      yield* TestClock.adjust("10 millis")
      expect(fakes.created).toEqual(["a", "b", "a"])
      expect(Object.fromEntries(yield* manager.states)).toEqual({ a: "sleeping" })
      expect(yield* manager.stateOf("b")).toBe("online")
      // An unchanged snapshot changes nothing.
      yield* SubscriptionRef.set(store.current, { ...snapshotOf({ a: LOCAL(`start_timeout = "2m"`) }), revision: 4 })
      yield* TestClock.adjust("10 millis")
      expect(fakes.created).toEqual(["a", "b", "a"])
    }).pipe(Effect.provide(managerLayer(snapshotOf({ a: LOCAL() }), fakes.make)))
  })
})

describe("state machine", () => {
  const status = (state: Parameters<typeof initialStatus>[0]) => initialStatus(state, 0)

  it("ignores the state from before a start request until the provider shows progress", () => {
    const starting = { ...status({ _tag: "Stopped", requested: false, detail: "off" }), state: "starting" as const, pending: "start" as const }
    expect(step(starting, { _tag: "Observed", observation: { _tag: "Stopped", requested: false, detail: "off" } })).toBeUndefined()
    const progressed = step(starting, { _tag: "Observed", observation: { _tag: "Starting", detail: "starting" } })
    expect(progressed).toMatchObject({ state: "starting", progressed: true })
    expect(
      step({ ...starting, progressed: true }, { _tag: "Observed", observation: { _tag: "Stopped", requested: false, detail: "off" } })
    ).toMatchObject({ state: "crashed" })
  })

  it("a polled crash before progress, or a poll that fails, does not end a start; a crash the process reports does", () => {
    const starting = { ...status({ _tag: "Crashed", detail: "crashed", polled: true }), state: "starting" as const, pending: "start" as const }
    expect(step(starting, { _tag: "Observed", observation: { _tag: "Crashed", detail: "still", polled: true } })).toBeUndefined()
    expect(step({ ...starting, progressed: true }, { _tag: "Observed", observation: { _tag: "Crashed", detail: "again", polled: true } })).toMatchObject({
      state: "crashed"
    })
    expect(step(starting, { _tag: "Observed", observation: { _tag: "Crashed", detail: "exited", polled: false } })).toMatchObject({ state: "crashed" })
    const failed = (reason: "unreachable" | "http_status" | "bad_response" | "unauthorized") =>
      step(starting, { _tag: "Observed", observation: { _tag: "Failed", error: new ProviderError({ reason, message: reason }) } })
    expect([failed("unreachable"), failed("http_status"), failed("bad_response")]).toEqual([undefined, undefined, undefined])
    expect(failed("unauthorized")).toMatchObject({ state: "offline" })
    // Outside a start, a failed poll is news.
    const online = status({ _tag: "Running", detail: "up" })
    expect(step(online, { _tag: "Observed", observation: { _tag: "Failed", error: new ProviderError({ reason: "unreachable", message: "x" }) } })).toMatchObject({
      state: "offline"
    })
  })

  it("a start past start_timeout that the provider goes on with is crashed while it still says starting", () => {
    const starting = { ...status({ _tag: "Stopped", requested: false, detail: "off" }), state: "starting" as const, pending: "start" as const, progressed: true }
    const timedOut = { _tag: "StartTimedOut", reason: "not ready within 1m", providerGoesOn: true } as const
    const crashed = step(starting, timedOut)!
    expect(crashed).toMatchObject({ state: "crashed", pending: "start", progressed: true })
    const afterTimeout = { ...crashed, since: 0 }
    // A panel polled after the timeout still answers "starting" for the same start: not news.
    expect(step(afterTimeout, { _tag: "Observed", observation: { _tag: "Starting", detail: "starting" } })).toBeUndefined()
    expect(step(afterTimeout, { _tag: "Observed", observation: { _tag: "Running", detail: "up at last" } })).toMatchObject({ state: "online" })
    // Once the provider, having shown the start, shows it stopped or crashed, a later "starting" is a new start.
    for (const observation of [{ _tag: "Stopped", requested: false, detail: "off" }, { _tag: "Crashed", detail: "exited", polled: true }] as const) {
      const settled = step(afterTimeout, { _tag: "Observed", observation })!
      expect(settled).toMatchObject({ state: "crashed", pending: undefined })
      expect(step({ ...settled, since: 0 }, { _tag: "Observed", observation: { _tag: "Starting", detail: "again" } })).toMatchObject({ state: "starting" })
    }
    // Before it showed the start, "stopped" or a polled "crashed" is the state from before the request: the start stays pending.
    const unseen = { ...step({ ...starting, progressed: false }, timedOut)!, since: 0 }
    expect(unseen).toMatchObject({ state: "crashed", pending: "start", progressed: false })
    expect(step(unseen, { _tag: "Observed", observation: { _tag: "Stopped", requested: false, detail: "off" } })).toBeUndefined()
    expect(step(unseen, { _tag: "Observed", observation: { _tag: "Crashed", detail: "off", polled: true } })).toBeUndefined()
    // A join waits for it again, with what the provider showed of it.
    expect(step(afterTimeout, { _tag: "StartRequested", reason: "a player is joining" })).toMatchObject({ state: "starting", pending: "start", progressed: true })
    // A local process is killed at the timeout: nothing is pending, and a join starts anew.
    const killed = { ...step(starting, { ...timedOut, providerGoesOn: false })!, since: 0 }
    expect(killed).toMatchObject({ state: "crashed", pending: undefined })
    expect(step(killed, { _tag: "Observed", observation: { _tag: "Starting", detail: "starting" } })).toMatchObject({ state: "starting" })
    expect(step(killed, { _tag: "StartRequested", reason: "a player is joining" })).toMatchObject({ state: "starting", progressed: false })
  })

  it("ignores a stale running report after a stop request, and returns to online when the stop is never confirmed", () => {
    const stopping = { ...status({ _tag: "Running", detail: "up" }), state: "stopping" as const, pending: "stop" as const }
    expect(step(stopping, { _tag: "Observed", observation: { _tag: "Running", detail: "up" } })).toBeUndefined()
    expect(step(stopping, { _tag: "StopTimedOut", reason: "not confirmed" })).toMatchObject({ state: "online" })
    expect(step(stopping, { _tag: "Observed", observation: { _tag: "Stopped", requested: true, detail: "exited" } })).toMatchObject({
      state: "sleeping"
    })
  })

  it("maps first observations to initial states", () => {
    const error = new ProviderError({ reason: "unreachable", message: "no answer" })
    expect(
      (
        [
          { _tag: "Running", detail: "" },
          { _tag: "Starting", detail: "" },
          { _tag: "Stopping", detail: "" },
          { _tag: "Stopped", requested: false, detail: "" },
          { _tag: "Crashed", detail: "", polled: true },
          { _tag: "Failed", error }
        ] as const
      ).map((observation) => status(observation).state)
    ).toEqual(["online", "starting", "stopping", "sleeping", "crashed", "offline"])
  })
})
