/**
 * A worker thread's data plane: its listening socket, the session pipeline and the relays, built from replicas of
 * what the main thread owns (the configuration, the ban index, the servers' states), the state shared by every
 * thread (rate windows, handshakes in progress, connection and player counts, balancer state), and calls to the
 * main thread for what only it can do (wake a sleeping server, answer a ping from the status cache, look players up
 * for the BungeeCord channel). The sessions it admits are reported to the main thread's registry; the main thread
 * can end one with a reason, and hands it BungeeCord deliveries for its players.
 *
 * It loads no schema and no configuration file code: the configuration arrives decoded (workers/snapshotWire.ts).
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Runtime from "effect/Runtime"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type { MessagePort } from "node:worker_threads"
import type { ServerState } from "../schema/common.js"
import { Backend } from "../services/Backend.js"
import { Balancer } from "../services/Balancer.js"
import { endBannedSessions } from "../services/bans/endBanned.js"
import type { BanDataPlane } from "../services/BanStore.js"
import { buildIndex, findIpBan, findPlayerBan } from "../services/bans/lookup.js"
import { targetKey } from "../services/bans/target.js"
import { ConfigStore, followSnapshot } from "../services/ConfigStore.js"
import { Forwarding } from "../services/Forwarding.js"
import { IpFilter } from "../services/IpFilter.js"
import { listen, shutdownGrace } from "../services/listener/listen.js"
import { releaseOnce } from "../services/once.js"
import { PlayerRegistry, type PlayerRegistryDataPlane } from "../services/PlayerRegistry.js"
import { rateLimiterDataPlane } from "../services/RateLimiter.js"
import { Relay } from "../services/Relay.js"
import { deliverHere } from "../services/relay/packet/bungee.js"
import { type ChannelNetwork, type ChannelSession, ONCE_REQUESTS } from "../services/relay/packet/PacketStart.js"
import { Router } from "../services/Router.js"
import type { EnsureResult } from "../services/ServerManager.js"
import { MOJANG_SESSION_SERVER } from "../services/session/authentication.js"
import { makePipeline } from "../services/session/pipeline.js"
import { connectionsOpenedBy, statsDataPlane } from "../services/Stats.js"
import { type ConnectionTrace, makeTracing } from "../services/telemetry/connectionTrace.js"
import { SharedMemory } from "../services/SharedMemory.js"
import type { StatusAnswer, StatusRequest } from "../services/StatusService.js"
import { BUILT_IN_TEXT, composeStatus } from "../services/status/motd.js"
import { shrinkHeap } from "../services/runtime/shrinkHeap.js"
import { makeCalls } from "../services/workers/calls.js"
import { makeStatusMemo } from "../services/workers/statusMemo.js"
import type { FromWorker, SessionEvent, ToWorker, WorkerData, WorkerLogRecord } from "../services/workers/messages.js"
import { decodeSnapshot } from "../services/workers/snapshotWire.js"
import { LOG_LEVELS, type LogLevelName, logLevelOf, messageText } from "./Logging.js"
import { logFieldsOf } from "../services/log/connectionFields.js"
import { clockOnOrigin } from "../services/monotonicClock.js"

/** A wake waits up to 25 s on the main thread; the call allows for that and a little more. */
const WAKE_CALL_MS = 60_000
const STATUS_CALL_MS = 10_000
/** A BungeeCord lookup: the main thread answers at once from its registry, unless it is stopping. */
const CHANNEL_CALL_MS = 5_000

/** The answer a ping gets when the main thread cannot give one (it is stopping): the server shown unreachable. */
const unreachableAnswer = (request: StatusRequest): StatusAnswer => {
  const json = composeStatus({
    entry: undefined,
    fallbackText: BUILT_IN_TEXT.unreachable,
    protocolVersion: request.handshake.protocolVersion,
    online: 0,
    max: request.server?.config.max_players ?? 0
  })
  return { json, text: JSON.stringify(json), source: "composed", state: "unreachable", reuseForMs: 0 }
}

/** How long a worker gathers session events, log lines and traces before it sends them to the main thread (ms). */
const BATCH_MS = 10

const levelOf = (level: string): LogLevelName => LOG_LEVELS.find((known) => known === level) ?? "info"

export const runWorker = (data: WorkerData, port: MessagePort): void => {
  const post = (message: FromWorker) => port.postMessage(message)
  const calls = makeCalls((message) => port.postMessage(message))

  // Session events, log lines and finished traces go to the main thread in batches, one message of each at most every
  // BATCH_MS. Per turn of the event loop, under a login rush each batch held a session or two, and the main thread
  // spent about 28 µs a login waking up and decoding them; every 10 ms, about 13 (docs/benchmark-history.md).
  let pending: Array<SessionEvent> = []
  let logs: Array<WorkerLogRecord> = []
  let traces: Array<ConnectionTrace> = []
  let flushing = false
  const flush = () => {
    flushing = false
    const events = pending
    const records = logs
    const finished = traces
    pending = []
    logs = []
    // Sessions first: by the time the main thread writes a line about a session ("joined"), its registry (the admin
    // API, a kick, a ban) knows that session.
    if (events.length > 0) post({ _tag: "Sessions", events })
    if (records.length > 0) post({ _tag: "Logs", records })
    if (finished.length > 0) {
      traces = []
      post({ _tag: "Traces", traces: finished })
    }
  }
  const soon = () => {
    if (flushing) return
    flushing = true
    setTimeout(flush, BATCH_MS)
  }
  const emit = (event: SessionEvent) => {
    pending.push(event)
    soon()
  }
  /** The worker's logger: every line goes to the main thread, which writes it with its own logger. */
  const relayLogger = Logger.make(({ annotations, cause, context, date, logLevel, message }) => {
    logs.push({
      level: logLevel.label,
      message: messageText(message),
      fields: logFieldsOf({ annotations, context }),
      cause: Cause.isEmpty(cause) ? undefined : Cause.pretty(cause),
      at: date.getTime()
    })
    soon()
  })

  /** The grace the main thread gave with Drain, once it has. */
  let drainGraceMs: number | undefined

  const program = Effect.gen(function* () {
    // The configuration replica: the main thread sends each new snapshot.
    const store = yield* ConfigStore
    const current = store.current
    let banIndex = buildIndex(data.bans)
    const bans: BanDataPlane = {
      ipBan: (ip, nowMs) => findIpBan(banIndex, ip, nowMs),
      playerBan: (player, nowMs) => findPlayerBan(banIndex, player, nowMs)
    }
    const states = new Map<string, ServerState>(data.states)
    /** Sessions ended for a ban whose connections are still closing: not ended, nor logged, twice. */
    const bannedEnded = new Set<number>()
    const shared = yield* SharedMemory
    const stats = statsDataPlane(data.stats, data.index)
    const registry = yield* PlayerRegistry
    const relay = yield* Relay
    const runtime = yield* Effect.runtime<never>()

    /** The local registry's data plane, telling the main thread what comes and goes. */
    const reported: Pick<PlayerRegistryDataPlane, "admit" | "countFor" | "claimOnline"> = {
      countFor: registry.dataPlane.countFor,
      claimOnline: registry.dataPlane.claimOnline,
      admit: (server, entry, since) => {
        const lease = registry.dataPlane.admit(server, entry, since)
        if (lease === undefined) return undefined
        emit({ _tag: "Added", entry: { ...entry, since } })
        let meter: { bytesIn: () => number; bytesOut: () => number } | undefined
        return {
          id: lease.id,
          attachEnder: lease.attachEnder,
          identify: (name, uuid) => {
            lease.identify(name, uuid)
            emit({ _tag: "Identified", sessionId: entry.id, name, uuid })
          },
          attachBackend: (backendAddress, bytes) => {
            meter = bytes
            lease.attachBackend(backendAddress, bytes)
            emit({ _tag: "Backend", sessionId: entry.id, backendAddress })
          },
          release: releaseOnce(() => {
            lease.release()
            emit({ _tag: "Removed", sessionId: entry.id, bytesIn: meter?.bytesIn() ?? 0, bytesOut: meter?.bytesOut() ?? 0 })
            meter = undefined
          })
        }
      }
    }

    const runFork = Runtime.runFork(runtime)
    /** The BungeeCord channel proxy-wide: lookups in the main thread's registry, deliveries routed by it. */
    const channel: ChannelNetwork = {
      lookup: (query, reply) =>
        runFork(
          Effect.flatMap(
            Effect.either(
              calls.call<ReadonlyArray<ChannelSession>>("a BungeeCord lookup", CHANNEL_CALL_MS, (id) => ({ _tag: "Call", id, method: "channelLookup", query }))
            ),
            (answer) => Effect.sync(() => (answer._tag === "Right" ? reply(answer.right) : reply([], answer.left.message)))
          )
        ),
      // Forwarded data of its own (a view into a pooled Buffer would take the whole pool along).
      route: (delivery) => post({ _tag: "ChannelRoute", delivery: "data" in delivery ? { ...delivery, data: new Uint8Array(delivery.data) } : delivery }),
      firstTime: (request) => shared.once.first(ONCE_REQUESTS.indexOf(request))
    }

    const snapshot = yield* followSnapshot(store)
    /** Pings are answered from the main thread's status cache, each answer reused for as long as it says. */
    const statusMemo = makeStatusMemo({
      ask: (request) =>
        calls
          .call<StatusAnswer>("a status answer", STATUS_CALL_MS, (id) => ({
            _tag: "Call",
            id,
            method: "statusAnswer",
            request: {
              serverId: request.server?.id,
              state: request.state,
              handshake: request.handshake,
              clientIp: request.clientIp,
              preamble: request.preamble
            }
          }))
          .pipe(Effect.orElseSucceed(() => unreachableAnswer(request))),
      snapshot,
      nowMs: () => performance.now(),
      count: stats.statusCache
    })

    const handle = makePipeline({
      clock: yield* Effect.clock,
      snapshot,
      rateLimiter: rateLimiterDataPlane(shared.ipTable),
      ipFilter: (yield* IpFilter).dataPlane,
      bans,
      router: (yield* Router).dataPlane,
      balancer: (yield* Balancer).dataPlane,
      registry: reported,
      channel,
      status: statusMemo,
      manager: {
        dataPlane: { manages: (id) => states.has(id), stateOf: (id) => states.get(id) ?? "online" },
        ensureOnline: (serverId) =>
          calls
            .call<EnsureResult>(`waking ${serverId}`, WAKE_CALL_MS, (id) => ({ _tag: "Call", id, method: "ensureOnline", serverId }))
            .pipe(Effect.catchAll((error) => Effect.succeed<EnsureResult>({ _tag: "Unavailable", state: "offline", reason: error.message })))
      },
      backend: yield* Backend,
      forwarding: yield* Forwarding,
      relay: relay.dataPlane,
      logDetached: Runtime.runFork(runtime),
      infoLogged: LogLevel.greaterThanEqual(LogLevel.Info, yield* FiberRef.get(FiberRef.currentMinimumLogLevel)),
      debugLogged: LogLevel.greaterThanEqual(LogLevel.Debug, yield* FiberRef.get(FiberRef.currentMinimumLogLevel)),
      stats,
      tracing:
        data.tracing === undefined
          ? undefined
          : makeTracing(data.tracing.samplingRatio, data.index + 1, (trace) => {
              traces.push(trace)
              soon()
            }),
      sessionServer: process.env.PORTAL_SESSION_SERVER ?? MOJANG_SESSION_SERVER
    })

    // Connection ids are unique across workers: this worker's count, with its index in the last three digits. A
    // replacement goes on from the count of the worker it replaces (each connection is counted as opened as it gets
    // its id), so that an id in the logs, the admin API or a trace names one connection.
    let counter = connectionsOpenedBy(data.stats, data.index)
    const listening = yield* listen({
      handle,
      store,
      relay,
      target: data.listen,
      admit: (max) => shared.connections.enter(max),
      onRefused: () => stats.rejected("max_connections"),
      nextId: () => ++counter * 1000 + data.index + 1,
      // The main thread's grace, sent with Drain: this thread's environment is a copy made when it started.
      grace: () => (drainGraceMs === undefined ? shutdownGrace() : Duration.millis(drainGraceMs))
    })

    port.on("message", (message: ToWorker) => {
      switch (message._tag) {
        case "Config":
          Runtime.runFork(runtime)(SubscriptionRef.set(current, decodeSnapshot(message.snapshot)))
          return
        case "BanChanges": {
          // Setting a record that is there already, or removing one that is gone, changes nothing: a change the
          // worker's start already had is harmless.
          const all = new Map(banIndex.all)
          for (const key of message.removed) all.delete(key)
          for (const ban of message.set) {
            const key = targetKey(ban.target)
            all.delete(key)
            all.set(key, ban)
          }
          banIndex = buildIndex(all.values())
          // This worker's players a new ban matches go now: each was either admitted before these bans arrived (and
          // is listed here) or is checked against them at admission.
          if (message.set.length > 0) Runtime.runFork(runtime)(Effect.asVoid(endBannedSessions(registry, bans, bannedEnded)))
          return
        }
        case "States":
          states.clear()
          for (const [id, state] of message.states) states.set(id, state)
          return
        case "EndSession":
          Runtime.runFork(runtime)(registry.end(message.sessionId, message.reason))
          return
        case "AskBytes":
          Runtime.runFork(runtime)(
            Effect.flatMap(registry.list, (sessions) =>
              Effect.sync(() =>
                post({ _tag: "Bytes", id: message.id, sessions: sessions.map(({ id, bytesIn, bytesOut }) => ({ id, bytesIn, bytesOut })) })
              )
            )
          )
          return
        case "Channel":
          // In a fiber, as EndSession: a failure is logged (not thrown from the port's handler), and answered.
          runFork(
            Effect.sync(() => deliverHere(message.delivery)).pipe(
              Effect.catchAllCause((cause) => Effect.as(Effect.logError("a BungeeCord delivery failed", cause), [] as ReadonlyArray<string>)),
              Effect.flatMap((reached) => Effect.sync(() => post({ _tag: "ChannelDelivered", id: message.id, reached })))
            )
          )
          return
        case "Reply":
          calls.settle(message.id, message.value)
          return
        case "Drain":
          // Handled by the runner below.
          return
        case "Crash":
          if (data.testHooks) {
            setImmediate(() => {
              throw new Error("crash asked for by a test")
            })
          }
          return
      }
    })
    post({ _tag: "Ready", address: listening.address })
    yield* Effect.forkDaemon(shrinkHeap)
    return yield* Effect.never
  }).pipe(Effect.annotateLogs("worker", data.index + 1))

  const layer = Layer.mergeAll(Relay.Default, IpFilter.Default, Router.Default, Forwarding.Default).pipe(
    Layer.provideMerge(Backend.Default),
    Layer.provideMerge(Layer.mergeAll(Balancer.Default, PlayerRegistry.Default)),
    Layer.provideMerge(SharedMemory.layerAttached(data.shared, data.index)),
    Layer.provideMerge(ConfigStore.layerStatic(decodeSnapshot(data.snapshot))),
    Layer.provideMerge(Layer.merge(Logger.replace(Logger.defaultLogger, relayLogger), Logger.minimumLogLevel(logLevelOf[levelOf(data.log.level)])))
  )
  // The main thread's clock origin: times in the shared memory mean the same on every thread.
  const main = Effect.runFork(program.pipe(Effect.scoped, Effect.provide(layer), Effect.withClock(clockOnOrigin(data.clockOrigin))))
  // Drain: stop accepting, let sessions finish for the grace period, end the rest (the scope's finalizers).
  port.on("message", (message: ToWorker) => {
    if (message._tag === "Drain") {
      drainGraceMs = message.graceMs
      Effect.runFork(Fiber.interrupt(main))
    }
  })
  main.addObserver((exit) => {
    if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) {
      post({ _tag: "Failed", reason: Cause.pretty(exit.cause) })
      process.exitCode = 1
    } else {
      flush()
      post({ _tag: "Drained" })
    }
    calls.failAll("the worker is stopping")
    port.close()
  })
}
