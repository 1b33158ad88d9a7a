/**
 * WorkerPool: the data plane on N worker threads (`worker_threads` > 1), run from the main thread, which keeps the
 * control plane: it owns the configuration, the bans, the server managers, the health checks and the status cache,
 * and everything an operator sees.
 *
 * - Each worker gets a listening socket (workers/listening.ts), the current configuration, the bans and the servers'
 *   states at start, and every change to them as it happens; limits are in the state shared by every thread.
 * - Workers call the main thread to wake a sleeping server (it starts once, whoever asks) and for status answers
 *   (one cache for all); they report the sessions they admit, which the main thread's PlayerRegistry lists, and
 *   which it can end (a kick, a ban) through the worker that holds them.
 * - The BungeeCord channel is proxy-wide: workers ask the registry here for its lookups, and hand the deliveries
 *   for players they do not relay here, for the workers that do (workers/channelRouting.ts).
 * - A worker that stops unexpectedly is logged and replaced at once; what it held in the shared state is given back
 *   first. Sessions on other workers are untouched.
 * - On shutdown every worker drains (stops accepting, gives sessions the grace period), then the main thread goes.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as LogLevel from "effect/LogLevel"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"
import { availableParallelism } from "node:os"
import { formatHostPort } from "../schema/HostPort.js"
import { BanStore } from "./BanStore.js"
import { ConfigStore } from "./ConfigStore.js"
import { limitMallocArenas } from "./native/addon.js"
import { ListenError, shutdownGrace } from "./listener/listen.js"
import { currentConnectionLog } from "./log/connectionFields.js"
import { monotonicOriginOf } from "./monotonicClock.js"
import { PlayerRegistry, type SessionLease } from "./PlayerRegistry.js"
import { ServerManager } from "./ServerManager.js"
import { SharedMemory } from "./SharedMemory.js"
import { Stats } from "./Stats.js"
import { StatusService } from "./StatusService.js"
import { lookupSessions } from "./relay/packet/channelNetwork.js"
import type { ChannelDelivery } from "./relay/packet/PacketStart.js"
import { Telemetry } from "./Telemetry.js"
import type { Ban } from "./bans/file.js"
import { targetKey } from "./bans/target.js"
import { makeCalls } from "./workers/calls.js"
import { routeDelivery, type RoutingView } from "./workers/channelRouting.js"
import { type ListenPlan, planListening } from "./workers/listening.js"
import type { FromWorker, SessionBytes, SessionEvent, ToWorker, WorkerData, WorkerLogRecord } from "./workers/messages.js"
import { encodeSnapshot } from "./workers/snapshotWire.js"

/** malloc arenas for the whole process once worker threads run: the main thread's and one more. */
const MALLOC_ARENAS = 2

export interface WorkerPoolOptions {
  readonly workers: number
  readonly log: WorkerData["log"]
  /** Honour test-only messages (a provoked crash); PORTAL_TEST_HOOKS=1 sets it. */
  readonly testHooks?: boolean
}

export interface WorkerInfo {
  /** 1-based, as logged. */
  readonly worker: number
  readonly threadId: number
  /** Epoch ms of its start. */
  readonly since: number
  /** How many times this worker's place was filled after a crash. */
  readonly restarts: number
}

/** How long the main thread waits for a worker to listen. */
const START_TIMEOUT = Duration.seconds(15)
/** A worker that ran this long before it stopped is replaced at once, whatever its predecessors did. */
const STABLE_MS = 10_000
/** The longest pause before a replacement. */
const MAX_REPLACEMENT_PAUSE_MS = 30_000

/**
 * How long to wait before filling a place whose workers stopped soon after their start `quickExits` times in a row:
 * the first at once (a crash is replaced within a second), then 1 s, doubling up to 30 s, so that a worker that cannot
 * start (or crashes on what it meets first) is not restarted in a tight loop of compilation and log lines.
 */
export const replacementPause = (quickExits: number): number =>
  quickExits <= 1 ? 0 : Math.min(MAX_REPLACEMENT_PAUSE_MS, 1000 * 2 ** (quickExits - 2))
/** How often the byte counts of workers' sessions are refreshed for the registry. */
const BYTES_REFRESH = Duration.seconds(2)
/** The longest wait for the server manager to track a new configuration (a panel's first answer) before its states go out. */
const MANAGER_CATCH_UP = Duration.seconds(30)
/** How long a worker has to deliver a BungeeCord message to its players (it does so at once when it runs). */
const CHANNEL_DELIVERY_MS = 5_000

const CONNECTION_FIELDS = new Set(["conn", "ip", "server"])

/** A cause rendered on another thread, made a cause again: an error whose stack is that text. */
const causeOfText = (text: string): Cause.Cause<never> => {
  const [, name, message] = /^([\w$.]*(?:Error|Exception)): ([^\n]*)/.exec(text) ?? [undefined, "Error", text.split("\n", 1)[0] ?? ""]
  const error = new Error(message)
  error.name = name ?? "Error"
  error.stack = text
  return Cause.die(error)
}

/**
 * This thread's clock, but for the time a log line is stamped with: the time the worker logged it. A logger dates a
 * line from the fiber's clock; without this a worker's lines carried the time this thread wrote them, a batch (or,
 * with this thread busy, much more) after the event and out of order with its own lines.
 */
class LoggedAt implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  constructor(
    private readonly clock: Clock.Clock,
    private readonly at: number
  ) {}
  unsafeCurrentTimeMillis(): number {
    return this.at
  }
  get currentTimeMillis(): Effect.Effect<number> {
    return Effect.succeed(this.at)
  }
  unsafeCurrentTimeNanos(): bigint {
    return this.clock.unsafeCurrentTimeNanos()
  }
  get currentTimeNanos(): Effect.Effect<bigint> {
    return this.clock.currentTimeNanos
  }
  sleep(duration: Duration.Duration): Effect.Effect<void> {
    return this.clock.sleep(duration)
  }
}

/** A worker's log line, written by this thread's logger with the worker's fields and the time it was logged at. */
const relayLog = (record: WorkerLogRecord): Effect.Effect<void> => {
  const level = LogLevel.allLevels.find((known) => known.label === record.level) ?? LogLevel.Info
  const connection: Partial<Record<"conn" | "ip" | "server", unknown>> = {}
  const annotations: Record<string, unknown> = {}
  for (const [key, value] of record.fields) {
    if (CONNECTION_FIELDS.has(key)) connection[key as "conn" | "ip" | "server"] = value
    else annotations[key] = value
  }
  // The worker's cause (its text) is logged as a cause here too, so the line looks as it would on one thread.
  const logged = record.cause === undefined ? Effect.logWithLevel(level, record.message) : Effect.logWithLevel(level, record.message, causeOfText(record.cause))
  const line = Effect.clockWith((clock) => Effect.withClock(Effect.annotateLogs(logged, annotations), new LoggedAt(clock, record.at)))
  return typeof connection.conn === "number"
    ? Effect.locally(line, currentConnectionLog, {
        conn: connection.conn,
        ...(typeof connection.ip === "string" ? { ip: connection.ip } : {}),
        ...(typeof connection.server === "string" ? { server: connection.server } : {})
      })
    : line
}

/** The worker entry, dist/worker.js, from src/ (tests) as from dist/. */
const workerEntry = (): string => {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return join(dir, "dist", "worker.js")
    if (dirname(dir) === dir) return join(dirname(fileURLToPath(import.meta.url)), "..", "worker.js")
  }
}

interface Slot {
  worker: Worker | undefined
  threadId: number
  since: number
  restarts: number
  /** Workers of this place in a row that stopped within STABLE_MS of their start (see `replacementPause`). */
  quickExits: number
  /** The main thread's leases of this worker's sessions, by session id, with their last byte counts. */
  readonly sessions: Map<number, { readonly lease: SessionLease; bytes: { bytesIn: number; bytesOut: number } }>
  exited: Deferred.Deferred<void>
}

/**
 * The worker threads running now, as the pool keeps it: built before the pool and the web server so that the admin
 * API (which stops after the pool has drained) can read it.
 */
export class WorkerCensus extends Context.Tag("portal/WorkerCensus")<WorkerCensus, Ref.Ref<ReadonlyArray<WorkerInfo>>>() {
  static readonly layer = Layer.effect(WorkerCensus, Ref.make<ReadonlyArray<WorkerInfo>>([]))
}

export class WorkerPool extends Context.Tag("portal/WorkerPool")<
  WorkerPool,
  {
    /** Where the workers listen (port 0 in `bind` resolved). */
    readonly address: { readonly host: string; readonly port: number }
    readonly description: string
    readonly workers: Effect.Effect<ReadonlyArray<WorkerInfo>>
    /** Test hook: makes a worker throw from its event loop (only where test hooks are on). */
    readonly crash: (worker: number) => Effect.Effect<void>
  }
>() {
  static readonly layer = (options: WorkerPoolOptions) => Layer.scoped(WorkerPool, make(options))
}

const make = (options: WorkerPoolOptions) =>
  Effect.gen(function* () {
    const store = yield* ConfigStore
    const shared = yield* SharedMemory
    const bans = yield* BanStore
    const manager = yield* ServerManager
    const status = yield* StatusService
    const registry = yield* PlayerRegistry
    const stats = yield* Stats
    const telemetry = yield* Telemetry
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const entry = workerEntry()
    const initial = yield* store.get
    const planned = yield* planListening(initial.global.bind, initial.global.so_reuseport)
    if ("_tag" in planned) return yield* new ListenError({ address: formatHostPort(initial.global.bind), reason: planned.reason })
    const plan: ListenPlan = planned
    yield* Effect.addFinalizer(() => Effect.sync(() => plan.close()))
    if (plan.note !== undefined) yield* Effect.logWarning(plan.note)

    const slots: Array<Slot> = []
    const census = yield* WorkerCensus
    const listWorkers = (): ReadonlyArray<WorkerInfo> =>
      slots.flatMap((slot, index) =>
        slot.worker === undefined ? [] : [{ worker: index + 1, threadId: slot.threadId, since: slot.since, restarts: slot.restarts }]
      )
    const updateCensus = () => runFork(Ref.set(census, listWorkers()))
    let stopping = false
    const testHooks = options.testHooks ?? process.env.PORTAL_TEST_HOOKS === "1"

    const send = (message: ToWorker) => {
      for (const slot of slots) slot.worker?.postMessage(message)
    }

    // What every worker must know, sent to all as it changes.
    const statesNow = Effect.map(manager.states, (states) => [...states.entries()])
    const sendStates = Effect.flatMap(statesNow, (states) => Effect.sync(() => send({ _tag: "States", states })))
    yield* store.changes.pipe(
      Stream.runForEach((snapshot) => Effect.sync(() => send({ _tag: "Config", snapshot: encodeSnapshot(snapshot) }))),
      Effect.forkScoped
    )
    yield* manager.changes.pipe(Stream.runForEach(() => sendStates), Effect.forkScoped)
    // A reload that adds or removes a [server_manager] changes which servers are managed without any transition:
    // the states go out again once the manager tracks each configuration (else a worker kept showing a server it
    // no longer manages as sleeping, or one it just began to manage as unreachable, until some server changed state).
    yield* store.changes.pipe(
      Stream.runForEach((snapshot) =>
        manager.caughtUp(snapshot.revision).pipe(Effect.timeoutOption(MANAGER_CATCH_UP), Effect.zipRight(sendStates))
      ),
      Effect.forkScoped
    )
    // Bans: at once when the store says they changed (added or removed, through Portal or in the file), and a slow
    // comparison as a safety net.
    // Compared record by record: ban records are never changed in place, so the same records are the same bans, and
    // what is sent is the difference (serialising or copying 100,000 bans took the main thread hundreds of ms).
    // Workers start with the bans of their start (WorkerData), never older than these: nothing to send for them.
    let lastBans: ReadonlyArray<Ban> = yield* bans.list
    const sendBans = Effect.flatMap(bans.list, (list) =>
      Effect.sync(() => {
        if (list.length === lastBans.length && list.every((ban, i) => ban === lastBans[i])) return
        const before = new Set(lastBans)
        const now = new Set(list)
        const set = list.filter((ban) => !before.has(ban))
        const removed = lastBans.filter((ban) => !now.has(ban)).map((ban) => targetKey(ban.target))
        lastBans = list
        send({ _tag: "BanChanges", set, removed })
      })
    )
    yield* Effect.flatMap(bans.subscribe, (changes) => Stream.runForEach(changes, () => sendBans)).pipe(Effect.forkScoped)
    yield* sendBans.pipe(Effect.repeat(Schedule.spaced(Duration.seconds(5))), Effect.forkScoped)

    /** Calls to each worker: the byte counts of its sessions, for the registry's listing; channel deliveries. */
    const workerCalls = new Map<number, ReturnType<typeof makeCalls>>()
    const refreshBytes = Effect.forEach(
      slots,
      (slot, index) => {
        const calls = workerCalls.get(index)
        if (slot.worker === undefined || calls === undefined || slot.sessions.size === 0) return Effect.void
        return calls.call<ReadonlyArray<SessionBytes>>("byte counts", 5_000, (id) => ({ _tag: "AskBytes", id })).pipe(
          Effect.map((sessions) => {
            for (const { id, bytesIn, bytesOut } of sessions) {
              const known = slot.sessions.get(id)
              if (known !== undefined) known.bytes = { bytesIn, bytesOut }
            }
          }),
          Effect.ignore
        )
      },
      { discard: true }
    )
    yield* refreshBytes.pipe(Effect.repeat(Schedule.spaced(BYTES_REFRESH)), Effect.forkScoped)

    const onSessions = (slot: Slot, index: number, events: ReadonlyArray<SessionEvent>) => {
      for (const event of events) {
        switch (event._tag) {
          case "Added": {
            const lease = registry.track(event.entry)
            const known = { lease, bytes: { bytesIn: 0, bytesOut: 0 } }
            slot.sessions.set(event.entry.id, known)
            lease.attachEnder({
              end: (reason) => slots[index]?.worker?.postMessage({ _tag: "EndSession", sessionId: event.entry.id, reason } satisfies ToWorker)
            })
            break
          }
          case "Backend": {
            const known = slot.sessions.get(event.sessionId)
            known?.lease.attachBackend(event.backendAddress, {
              bytesIn: () => known.bytes.bytesIn,
              bytesOut: () => known.bytes.bytesOut
            })
            break
          }
          case "Identified":
            slot.sessions.get(event.sessionId)?.lease.identify(event.name, event.uuid)
            break
          case "Removed": {
            const known = slot.sessions.get(event.sessionId)
            if (known === undefined) break
            known.bytes = { bytesIn: event.bytesIn, bytesOut: event.bytesOut }
            known.lease.release()
            slot.sessions.delete(event.sessionId)
            break
          }
        }
      }
    }

    const answerCall = (worker: Worker, message: Extract<FromWorker, { _tag: "Call" }>) => {
      const reply = (value: unknown) => worker.postMessage({ _tag: "Reply", id: message.id, value } satisfies ToWorker)
      if (message.method === "ensureOnline") {
        runFork(Effect.map(manager.ensureOnline(message.serverId), reply))
        return
      }
      if (message.method === "channelLookup") {
        reply(lookupSessions(registry.dataPlane.sessions, message.query))
        return
      }
      const request = message.request
      runFork(
        Effect.flatMap(store.get, (snapshot) =>
          Effect.map(
            status.answer({
              server: request.serverId === undefined ? undefined : snapshot.servers.get(request.serverId),
              state: request.state,
              handshake: request.handshake,
              clientIp: request.clientIp,
              preamble: request.preamble === undefined ? undefined : Buffer.from(request.preamble)
            }),
            reply
          )
        )
      )
    }

    /** Passes a BungeeCord delivery worker `origin` could not make on to the workers relaying its players. */
    const routeChannel = (origin: number, delivery: ChannelDelivery) => {
      const view: RoutingView = {
        sessions: registry.dataPlane.sessions(),
        workerOf: (sessionId) => {
          const index = slots.findIndex((slot) => slot.worker !== undefined && slot.sessions.has(sessionId))
          return index < 0 ? undefined : index
        },
        workers: slots.flatMap((slot, index) => (slot.worker === undefined ? [] : [index]))
      }
      const deliverTo = (worker: number, wanted: ChannelDelivery) => {
        const calls = workerCalls.get(worker)
        if (calls === undefined) return Effect.succeed<ReadonlyArray<string>>([])
        return calls
          .call<ReadonlyArray<string>>("a BungeeCord delivery", CHANNEL_DELIVERY_MS, (id) => ({ _tag: "Channel", id, delivery: wanted }) satisfies ToWorker)
          .pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
      }
      runFork(routeDelivery(delivery, origin, view, deliverTo))
    }

    /** Gives back what a worker that is gone held: its shared places and the registry's listing of its sessions. */
    const forget = (slot: Slot, index: number) => {
      // The address table may be held for a moment by another thread: try again a few times until it is released.
      let released = shared.releaseWorker(index)
      for (let attempt = 0; (released.handshakes === undefined || released.online === undefined) && attempt < 20; attempt++) {
        // What the first call gave back stays counted; a later call gives back only what was left.
        const again = shared.releaseWorker(index)
        released = {
          handshakes: released.handshakes ?? again.handshakes,
          online: released.online ?? again.online,
          connections: released.connections + again.connections,
          players: released.players + again.players,
          sessions: released.sessions + again.sessions,
          locksFreed: released.locksFreed + again.locksFreed
        }
      }
      const moved = { bytesIn: 0, bytesOut: 0 }
      for (const { lease, bytes } of slot.sessions.values()) {
        moved.bytesIn += bytes.bytesIn
        moved.bytesOut += bytes.bytesOut
        lease.release()
      }
      slot.sessions.clear()
      stats.threadGone(index, moved)
      workerCalls.get(index)?.failAll("the worker stopped")
      return released
    }

    /** Starts the worker of place `index`; resolves when it listens. */
    const spawn = (index: number, restarts: number): Effect.Effect<void, ListenError> =>
      Effect.gen(function* () {
        const target = yield* plan.forWorker()
        const snapshot = yield* store.get
        const data: WorkerData = {
          index,
          shared: shared.buffers,
          stats: stats.buffer,
          listen: target,
          snapshot: encodeSnapshot(snapshot),
          bans: yield* bans.list,
          states: yield* statesNow,
          log: options.log,
          tracing: telemetry.workerTracing,
          testHooks,
          clockOrigin: monotonicOriginOf(yield* Effect.clock)
        }
        const ready = yield* Deferred.make<void, ListenError>()
        const exited = yield* Deferred.make<void>()
        const worker = new Worker(entry, { workerData: data, env: process.env })
        const slot: Slot = slots[index] ?? { worker, threadId: worker.threadId, since: Date.now(), restarts, quickExits: 0, sessions: new Map(), exited }
        slot.worker = worker
        slot.threadId = worker.threadId
        slot.since = Date.now()
        slot.restarts = restarts
        slot.exited = exited
        slots[index] = slot
        const calls = makeCalls((message) => worker.postMessage(message))
        workerCalls.set(index, calls)
        const name = `worker ${index + 1}`

        worker.on("message", (message: FromWorker) => {
          switch (message._tag) {
            case "Ready":
              runFork(Deferred.succeed(ready, undefined))
              return
            case "Failed":
              runFork(
                Effect.zipRight(
                  Effect.logError(`${name} failed: ${message.reason}`),
                  Deferred.fail(ready, new ListenError({ address: formatHostPort(snapshot.global.bind), reason: `${name}: ${message.reason}` }))
                )
              )
              return
            case "Call":
              answerCall(worker, message)
              return
            case "Sessions":
              onSessions(slot, index, message.events)
              return
            case "Bytes":
              calls.settle(message.id, message.sessions)
              return
            case "ChannelRoute":
              routeChannel(index, message.delivery)
              return
            case "ChannelDelivered":
              calls.settle(message.id, message.reached)
              return
            case "Drained":
              return
            case "Logs":
              for (const record of message.records) runFork(relayLog(record))
              return
            case "Traces":
              telemetry.exportTraces(message.traces)
              return
          }
        })
        // These lines are written outside the worker's start, so they carry its index themselves.
        const asWorker = Effect.annotateLogs("worker", index + 1)
        worker.on("error", (error) => {
          runFork(asWorker(Effect.logError(`${name} stopped on an error`, Cause.die(error))))
        })
        const startedAt = Date.now()
        worker.on("exit", (code) => {
          if (slot.worker === worker) slot.worker = undefined
          updateCensus()
          slot.quickExits = Date.now() - startedAt < STABLE_MS ? slot.quickExits + 1 : 0
          const pause = replacementPause(slot.quickExits)
          const released = forget(slot, index)
          runFork(Deferred.succeed(exited, undefined))
          runFork(Deferred.fail(ready, new ListenError({ address: formatHostPort(snapshot.global.bind), reason: `${name} exited (code ${code})` })))
          if (stopping) return
          const replace = Effect.logError(
            `${name} stopped unexpectedly (exit code ${code}); replacing it${pause > 0 ? ` in ${pause / 1000}s (it stopped ${slot.quickExits} times in a row soon after its start)` : ""} ` +
              // Each count names the limit it was held under: "player(s) online" read as the players it had, which
              // in the raw modes it always put at 0.
              `(gave back ${released.connections} connection(s), ${released.players} player place(s), ${released.sessions} backend session count(s), ` +
              `${released.handshakes ?? "?"} handshake(s), ${released.online ?? "?"} packet-mode player claim(s))`
          ).pipe(
            Effect.zipRight(Effect.sleep(Duration.millis(pause))),
            Effect.zipRight(Effect.suspend(() => (stopping ? Effect.void : Effect.tap(spawn(index, restarts + 1), () => Effect.logInfo(`${name} replaced`))))),
            // A replacement that did not start is stopped: its exit fills the place again, after the pause.
            Effect.catchAll((error) =>
              Effect.zipRight(
                Effect.logError(`${name} could not be replaced: ${error.message}; trying again`),
                Effect.sync(() => void slots[index]?.worker?.terminate())
              )
            )
          )
          runFork(asWorker(replace))
        })
        updateCensus()
        yield* Deferred.await(ready).pipe(
          Effect.timeoutFail({
            duration: START_TIMEOUT,
            onTimeout: () => new ListenError({ address: formatHostPort(snapshot.global.bind), reason: `${name} did not start in time` })
          })
        )
      }).pipe(Effect.annotateLogs("worker", index + 1))

    // Shutdown: every worker drains (stop accepting, sessions get the grace period), then the main thread goes on.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopping = true
        // The main thread's own listening socket first: while it is open the kernel would still queue connections
        // for the shared socket that no draining worker accepts.
        plan.close()
        const live = slots.filter((slot) => slot.worker !== undefined)
        if (live.length === 0) return
        send({ _tag: "Drain", graceMs: Duration.toMillis(shutdownGrace()) })
        const all = Effect.forEach(live, (slot) => Deferred.await(slot.exited), { discard: true })
        const drained = yield* all.pipe(Effect.interruptible, Effect.timeoutOption(Duration.sum(shutdownGrace(), Duration.seconds(5))))
        if (drained._tag === "None") {
          yield* Effect.logWarning("workers did not stop in time; stopping them now")
          yield* Effect.promise(() => Promise.all(live.map((slot) => slot.worker?.terminate())))
        }
      })
    )

    // Each thread would otherwise get a malloc arena of its own: about 2 MiB of RSS per worker (native/splice.cc).
    limitMallocArenas(MALLOC_ARENAS)
    // As many starting at once as there are cores: each compiles Portal's code, and more at once only slows them all
    // (with many workers, past the time each is given to start).
    yield* Effect.forEach(Array.from({ length: options.workers }, (_, index) => index), (index) => spawn(index, 0), {
      concurrency: Math.max(2, availableParallelism()),
      discard: true
    })
    yield* Effect.logInfo(`listening on ${formatHostPort(plan.address)} with ${options.workers} worker threads: ${plan.description}`)
    return {
      address: plan.address,
      description: plan.description,
      workers: Effect.sync(listWorkers),
      crash: (worker: number) => Effect.sync(() => slots[worker - 1]?.worker?.postMessage({ _tag: "Crash" } satisfies ToWorker))
    }
  }).pipe(Effect.catchAllDefect((defect) => Effect.fail(new ListenError({ address: "workers", reason: Cause.pretty(Cause.die(defect)) }))))
