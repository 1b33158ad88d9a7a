/**
 * ServerManager: the lifecycle of servers that have a `[server_manager]` table. Tracks each one's state
 * (sleeping, starting, online, stopping, crashed, offline), wakes a server when a player joins, stops it after
 * `shutdown_after` without players, and follows configuration reloads. The providers under `manager/` do the
 * starting and stopping; the pure state machine in `manager/stateMachine.ts` decides every transition.
 *
 * Servers without `[server_manager]` are not tracked here and are always reported `online`.
 */
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type { ServerState } from "../schema/common.js"
import { ServerManager as ServerManagerSchema, type ServerManagerConfig } from "../schema/ServerConfig.js"
import { ConfigStore, type ConfigSnapshot } from "./ConfigStore.js"
import { makeController } from "./manager/controller.js"
import { makeLocal } from "./manager/local.js"
import { makePanel } from "./manager/panel.js"
import { type MakeProvider, type Observation, type Provider, type ProviderError, REQUEST_TIMEOUT } from "./manager/Provider.js"
import { type Event, initialStatus, type Status, step, stillStarting } from "./manager/stateMachine.js"
import { monotonicMillis } from "./monotonicClock.js"
import { PlayerRegistry } from "./PlayerRegistry.js"
import { currentConnectionLog } from "./log/connectionFields.js"
import { Balancer } from "./Balancer.js"

export { ProviderError } from "./manager/Provider.js"
export type { MakeProvider, Observation, Provider, ProviderInput } from "./manager/Provider.js"

/** How long a login waits for a sleeping server to come online before the player is told it is starting. */
export const WAKE_WAIT = Duration.seconds(25)
/** Environment variable that overrides `WAKE_WAIT` (milliseconds). */
export const WAKE_WAIT_ENV = "PORTAL_WAKE_WAIT_MS"

export interface StateChange {
  readonly serverId: string
  readonly from: ServerState
  readonly to: ServerState
  /** Epoch milliseconds. */
  readonly at: number
  readonly reason?: string
}

export type EnsureResult =
  /** Ready (or not managed). */
  | { readonly _tag: "Online" }
  /** Still starting after the wait bound. */
  | { readonly _tag: "Starting" }
  /** Cannot be woken now: offline, a start that failed, a provider error. */
  | { readonly _tag: "Unavailable"; readonly state: ServerState; readonly reason: string }

/** The state of a managed server with its reason, for operators. */
export interface ServerStatus {
  readonly state: ServerState
  readonly reason: string
  /** Epoch milliseconds of the last change of state. */
  readonly since: number
}

/** A start or stop asked of a server that has no `[server_manager]`. */
export class NotManaged extends Data.TaggedError("NotManaged")<{ readonly serverId: string; readonly reason: string }> {}

/** What a start or stop asked from outside did: whether it began, and the state now. */
export interface CommandResult {
  readonly begun: boolean
  readonly state: ServerState
  readonly reason: string
}

export interface ServerManagerOptions {
  /** Overrides `WAKE_WAIT` (and `PORTAL_WAKE_WAIT_MS`). */
  readonly wakeWait?: Duration.DurationInput
  /** Bound of one HTTP request to a panel or controller API (default 5 s). */
  readonly requestTimeout?: Duration.DurationInput
  /** Builds the providers; by default `local`, `panel` or `controller` from the server's `type`. */
  readonly makeProvider?: MakeProvider
}

interface Entry {
  readonly id: string
  readonly config: ServerManagerConfig
  /** The encoded `[server_manager]` table, to notice changes on reload. */
  readonly key: string
  readonly scope: Scope.CloseableScope
  /** Done when a reload stops tracking the server (or tracks it anew): joins waiting on this entry look again. */
  readonly closed: Deferred.Deferred<void>
  readonly status: SubscriptionRef.SubscriptionRef<Status>
  readonly lock: Effect.Semaphore
  readonly provider: Provider
  /** Counts starts and stops Portal asked for; a timer only acts on the one it was set for. */
  starts: number
  stops: number
  /** A player waited while the server was stopping: start it as soon as the stop is done. */
  startAfterStop: boolean
  /** When the state last changed, on the monotonic clock (the status's `since` is a wall-clock date). */
  changedAt: number
  /** Last idle check that saw a player (or the first that no longer did), on the monotonic clock. */
  lastBusy: number
  /** Whether the last idle check saw a player. */
  sawPlayers: boolean
  /** The state in `status`, readable synchronously by the connection path. */
  state: ServerState
}

const encodeManager = Schema.encodeSync(ServerManagerSchema)
const configKey = (config: ServerManagerConfig) => JSON.stringify(encodeManager(config))

const ONLINE: EnsureResult = { _tag: "Online" }
const STARTING: EnsureResult = { _tag: "Starting" }

/** How long a stop Portal asked for may take before the server is taken to be still running. */
const stopBound = (config: ServerManagerConfig) =>
  config.type === "local" ? Duration.sum(config.shutdown_timeout, Duration.seconds(10)) : config.start_timeout

/** The idle check runs often enough to stop within a quarter of `shutdown_after` (at most every 5 s). */
const idleCheckInterval = (shutdownAfter: Duration.Duration) =>
  Duration.millis(Math.min(5_000, Math.max(50, Math.floor(Duration.toMillis(shutdownAfter) / 4))))

const defaultProvider =
  (executor: CommandExecutor.CommandExecutor, client: HttpClient.HttpClient): MakeProvider =>
  (input) => {
    const config = input.config
    switch (config.type) {
      case "local":
        return makeLocal(input, config).pipe(Effect.provideService(CommandExecutor.CommandExecutor, executor))
      case "panel":
        return makePanel(input, config).pipe(Effect.provideService(HttpClient.HttpClient, client))
      case "controller":
        return makeController(input, config).pipe(Effect.provideService(HttpClient.HttpClient, client))
    }
  }

const readWakeWait = (options: ServerManagerOptions) =>
  options.wakeWait !== undefined
    ? Effect.succeed(Duration.decode(options.wakeWait))
    : Config.integer(WAKE_WAIT_ENV).pipe(
        Config.option,
        Effect.map(Option.match({ onNone: () => WAKE_WAIT, onSome: (ms) => Duration.millis(Math.max(0, ms)) })),
        Effect.orElseSucceed(() => WAKE_WAIT)
      )

const make = (options: ServerManagerOptions) =>
  Effect.gen(function* () {
    const store = yield* ConfigStore
    const registry = yield* PlayerRegistry
    const executor = yield* CommandExecutor.CommandExecutor
    const client = yield* HttpClient.HttpClient
    // Optional so that the manager can be tested alone; the proxy always has one.
    const balancer = Option.getOrUndefined(yield* Effect.serviceOption(Balancer))
    const wakeWait = yield* readWakeWait(options)
    const requestTimeout = Duration.decode(options.requestTimeout ?? REQUEST_TIMEOUT)
    const makeProvider = options.makeProvider ?? defaultProvider(executor, client)
    const hub = yield* PubSub.sliding<StateChange>(4096)
    const entries = new Map<string, Entry>()
    const reconcileLock = yield* Effect.makeSemaphore(1)

    /** Work done for a server is logged with its annotation only (not the log fields of the caller's connection). */
    const asServer = (id: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.locally(
        Effect.locally(effect, FiberRef.currentLogAnnotations, HashMap.make(["server", id] as const)),
        currentConnectionLog,
        undefined
      )

    const locked = <A, E, R>(entry: Entry, effect: Effect.Effect<A, E, R>) => entry.lock.withPermits(1)(effect).pipe(asServer(entry.id))

    /** Applies one event (the caller holds the lock); true when the state changed. */
    const transition = (entry: Entry, event: Event): Effect.Effect<boolean> =>
      Effect.gen(function* () {
        const before = yield* SubscriptionRef.get(entry.status)
        const next = step(before, event)
        if (next === undefined) return false
        const now = yield* Clock.currentTimeMillis
        const changed = next.state !== before.state
        if (changed) entry.changedAt = yield* monotonicMillis
        entry.state = next.state
        yield* SubscriptionRef.set(entry.status, {
          state: next.state,
          reason: next.reason,
          pending: next.pending,
          progressed: next.progressed,
          since: changed ? now : before.since
        })
        // An offline server whose problem changed stays offline: the provider has logged the new problem already.
        if (!changed) return false
        yield* Effect.logInfo(`${entry.id}: ${before.state} -> ${next.state} (${next.reason})`)
        yield* PubSub.publish(hub, { serverId: entry.id, from: before.state, to: next.state, at: now, reason: next.reason })
        if (next.state === "online" && balancer !== undefined) {
          // A server that just came up is trusted until its next health probe says otherwise: the verdict of the
          // probes made while it slept would show it `unreachable` for up to an unhealthy_interval.
          const server = (yield* store.get).servers.get(entry.id)
          if (server !== undefined) yield* Effect.forEach(server.config.addresses, (address) => balancer.setHealth(server, address, true), { discard: true })
        }
        if (before.state === "stopping" && (next.state === "sleeping" || next.state === "crashed") && entry.startAfterStop) {
          entry.startAfterStop = false
          yield* beginStart(entry, "a player joined while the server was stopping")
        }
        if (next.state !== "stopping") entry.startAfterStop = false
        return true
      })

    /**
     * Carries out a command Portal asks of the provider (the caller holds the lock); false when `requested` changed
     * nothing. The command runs in the background; its failure, and the watchdog that fires after `bound`, act only if
     * no newer command of the same kind has begun since (`counter` tells the attempts apart).
     */
    const beginCommand = (
      entry: Entry,
      command: {
        readonly requested: Event
        readonly counter: "starts" | "stops"
        readonly run: Effect.Effect<void, ProviderError>
        readonly failed: (error: ProviderError) => Event
        readonly bound: Duration.Duration
        readonly timedOut: Event
        /** What to do once the watchdog's event changed the state. */
        readonly afterTimeout: Effect.Effect<void>
      }
    ): Effect.Effect<boolean> =>
      // Whole or not at all: a join that is interrupted here (its player left) must not leave the server "starting"
      // with no command under way and no watchdog.
      Effect.uninterruptible(Effect.gen(function* () {
        if (!(yield* transition(entry, command.requested))) return false
        entry[command.counter] += 1
        const attempt = entry[command.counter]
        /** `event`, unless a newer attempt has begun since; runs under the lock. */
        const ifCurrent = (event: Event) =>
          locked(entry, Effect.suspend(() => (attempt === entry[command.counter] ? transition(entry, event) : Effect.succeed(false))))
        const watchdog = Effect.sleep(command.bound).pipe(
          Effect.zipRight(ifCurrent(command.timedOut)),
          Effect.flatMap((changed) => (changed ? command.afterTimeout : Effect.void))
        )
        const run = Effect.catchAll(command.run, (error) => Effect.asVoid(ifCurrent(command.failed(error))))
        // Forked fibers inherit the region's uninterruptibility: theirs is given back, so that closing the scope ends them.
        yield* Effect.forkIn(Effect.interruptible(watchdog.pipe(asServer(entry.id))), entry.scope)
        yield* Effect.forkIn(Effect.interruptible(run.pipe(asServer(entry.id))), entry.scope)
        return true
      }))

    /** Starts a sleeping or crashed server (the caller holds the lock); false when it was not in such a state. */
    const beginStart = (entry: Entry, reason: string): Effect.Effect<boolean> =>
      Effect.flatMap(SubscriptionRef.get(entry.status), (before) =>
        beginCommand(entry, {
          requested: { _tag: "StartRequested", reason },
          counter: "starts",
          // A start that timed out and that the provider still works on is waited for again, not asked for twice.
          run: stillStarting(before) ? Effect.void : entry.provider.start,
          failed: (error) => ({ _tag: "StartFailed", error }),
          bound: entry.config.start_timeout,
          timedOut: {
            _tag: "StartTimedOut",
            reason: `not ready within ${Duration.format(entry.config.start_timeout)}`,
            providerGoesOn: entry.config.type !== "local"
          },
          afterTimeout: Effect.asVoid(Effect.forkIn(entry.provider.abort.pipe(asServer(entry.id)), entry.scope))
        })
      )

    /** Stops an online (or starting) server (the caller holds the lock). */
    const beginStop = (entry: Entry, reason: string): Effect.Effect<boolean> => {
      const bound = stopBound(entry.config)
      return beginCommand(entry, {
        requested: { _tag: "StopRequested", reason },
        counter: "stops",
        run: entry.provider.stop,
        failed: (error) => ({ _tag: "StopFailed", error }),
        bound,
        timedOut: { _tag: "StopTimedOut", reason: `the stop was not confirmed within ${Duration.format(bound)}` },
        afterTimeout: Effect.void
      })
    }

    /** Waits up to `millis` for the state to leave `from`, or for a reload to stop tracking the entry; true if either came. */
    const waitWhile = (entry: Entry, from: ServerState, millis: number) =>
      millis <= 0
        ? Effect.succeed(false)
        : entry.status.changes.pipe(
            Stream.filter((status) => status.state !== from),
            Stream.runHead,
            Effect.race(Deferred.await(entry.closed)),
            Effect.interruptible,
            Effect.timeoutOption(Duration.millis(millis)),
            Effect.map(Option.isSome)
          )

    /**
     * The entry of a server the configuration gives a `[server_manager]` that a reload has not tracked yet: its
     * provider's first answer (a panel's may take seconds) is awaited, up to `millis`.
     */
    const untracked = (serverId: string, millis: number) =>
      Effect.gen(function* () {
        const snapshot = yield* store.get
        if (snapshot.servers.get(serverId)?.config.server_manager === undefined || millis <= 0) return undefined
        yield* caughtUp(snapshot.revision).pipe(Effect.timeoutOption(Duration.millis(millis)))
        return entries.get(serverId)
      })

    const ensureOnline = (serverId: string): Effect.Effect<EnsureResult> =>
      Effect.gen(function* () {
        const deadline = (yield* monotonicMillis) + Duration.toMillis(wakeWait)
        const remaining = Effect.map(monotonicMillis, (now) => deadline - now)
        // A server a reload has just added is woken like any other once tracked, not dialed as if it had no manager.
        let entry = entries.get(serverId) ?? (yield* untracked(serverId, yield* remaining))
        if (entry === undefined) return ONLINE
        // One start per call at most: a start that fails is reported, not retried in a loop.
        let startSeen = false
        for (;;) {
          // A reload may have stopped tracking the server meanwhile (not managed any more: the join goes on as for
          // any server), or tracks it anew with other settings (the join goes on with that entry, and may start it).
          // A closed entry: the reload that closed it is let finish first, so that its replacement is in place.
          if (yield* Deferred.isDone(entry.closed)) yield* reconcileLock.withPermits(1)(Effect.void)
          const now = entries.get(serverId)
          if (now === undefined) return ONLINE
          if (now !== entry) {
            entry = now
            startSeen = false
          }
          const status = yield* SubscriptionRef.get(entry.status)
          switch (status.state) {
            case "online":
            case "unreachable": {
              // A join counts as activity at once: the registry may list the player a little later (a worker's
              // sessions arrive in batches), and an idle check in between must not stop the server under them.
              // Under the lock, as the idle check decides: either the join comes first and the check sees it, or
              // the stop does and the join sees "stopping".
              const joining = entry
              const kept = yield* locked(
                joining,
                Effect.gen(function* () {
                  const current = (yield* SubscriptionRef.get(joining.status)).state
                  if (current !== "online" && current !== "unreachable") return false
                  joining.lastBusy = yield* monotonicMillis
                  return true
                })
              )
              if (kept) return ONLINE
              continue
            }
            case "offline":
              return { _tag: "Unavailable", state: status.state, reason: status.reason }
            case "sleeping":
            case "crashed":
              if (startSeen) return { _tag: "Unavailable", state: status.state, reason: status.reason }
              startSeen = true
              yield* locked(entry, beginStart(entry, "a player is joining"))
              continue
            case "starting":
              startSeen = true
              if (!(yield* waitWhile(entry, "starting", yield* remaining))) return STARTING
              continue
            case "stopping":
              if (yield* waitWhile(entry, "stopping", yield* remaining)) continue
              // Out of time: have the server started as soon as the stop is done.
              const stopping = entry
              yield* locked(
                stopping,
                Effect.gen(function* () {
                  const now = yield* SubscriptionRef.get(stopping.status)
                  if (now.state === "stopping") stopping.startAfterStop = true
                  else yield* beginStart(stopping, "a player is joining")
                })
              )
              return STARTING
          }
        }
      })

    const idleCheck = (entry: Entry, shutdownAfter: Duration.Duration) =>
      Effect.gen(function* () {
        const status = yield* SubscriptionRef.get(entry.status)
        if (status.state !== "online") return
        const now = yield* monotonicMillis
        if ((yield* registry.playersOn(entry.id)) > 0) {
          entry.lastBusy = now
          entry.sawPlayers = true
          return
        }
        if (entry.sawPlayers) {
          // The last player left at some time since the previous check: the idle time counts from now, so a stop
          // comes up to one check late, never early.
          entry.sawPlayers = false
          entry.lastBusy = now
          return
        }
        const idleFor = () => now - Math.max(entry.changedAt, entry.lastBusy)
        if (idleFor() < Duration.toMillis(shutdownAfter)) return
        yield* locked(
          entry,
          Effect.gen(function* () {
            // Checked again under the lock: the state may have moved on, or a join come in, meanwhile.
            const current = yield* SubscriptionRef.get(entry.status)
            if (current.state === "online" && idleFor() >= Duration.toMillis(shutdownAfter)) {
              yield* beginStop(entry, `no players for ${Duration.format(shutdownAfter)}`)
            }
          })
        )
      })

    const createEntry = (id: string, config: ServerManagerConfig): Effect.Effect<Entry> =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const lock = yield* Effect.makeSemaphore(1)
        let entry: Entry | undefined
        const report = (observation: Observation): Effect.Effect<void> =>
          Effect.suspend(() => (entry === undefined ? Effect.void : Effect.asVoid(locked(entry, transition(entry, { _tag: "Observed", observation })))))
        const provider = yield* makeProvider({ serverId: id, config, report, requestTimeout }).pipe(Scope.extend(scope))
        const first = yield* provider.initial
        const firstStatus = initialStatus(first, yield* Clock.currentTimeMillis)
        const status = yield* SubscriptionRef.make(firstStatus)
        const created: Entry = {
          id,
          config,
          key: configKey(config),
          scope,
          closed: yield* Deferred.make<void>(),
          status,
          lock,
          provider,
          starts: 0,
          stops: 0,
          startAfterStop: false,
          changedAt: yield* monotonicMillis,
          lastBusy: 0,
          sawPlayers: false,
          state: firstStatus.state
        }
        entry = created
        const initial = yield* SubscriptionRef.get(status)
        yield* Effect.logInfo(`managed by the ${config.type} provider; state ${initial.state} (${initial.reason})`)
        yield* Effect.forkIn(provider.watch, scope)
        const shutdownAfter = config.shutdown_after
        if (shutdownAfter !== undefined) {
          yield* Effect.forkIn(
            idleCheck(created, shutdownAfter).pipe(Effect.repeat(Schedule.spaced(idleCheckInterval(shutdownAfter))), Effect.asVoid),
            scope
          )
        }
        return created
      }).pipe(asServer(id))

    const closeEntry = (entry: Entry, why: string) =>
      Effect.logInfo(`no longer managed: ${why}`).pipe(
        Effect.zipRight(Scope.close(entry.scope, Exit.void)),
        Effect.zipRight(Deferred.succeed(entry.closed, undefined)),
        asServer(entry.id)
      )

    /** The revision of the configuration the entries last matched. */
    const reconciled = yield* SubscriptionRef.make(-1)

    const reconcile = (snapshot: ConfigSnapshot) =>
      reconcileLock.withPermits(1)(
        Effect.gen(function* () {
          for (const [id, entry] of [...entries]) {
            const config = snapshot.servers.get(id)?.config.server_manager
            if (config === undefined) {
              yield* closeEntry(entry, snapshot.servers.has(id) ? "[server_manager] was removed" : "the server was removed")
              entries.delete(id)
            } else if (configKey(config) !== entry.key) {
              yield* closeEntry(entry, "[server_manager] changed; tracking it again with the new settings")
              entries.delete(id)
            }
          }
          const added: Array<readonly [string, ServerManagerConfig]> = []
          for (const [id, server] of snapshot.servers) {
            const config = server.config.server_manager
            if (config !== undefined && !entries.has(id)) added.push([id, config])
          }
          const created = yield* Effect.forEach(added, ([id, config]) => createEntry(id, config), { concurrency: "unbounded" })
          for (const entry of created) entries.set(entry.id, entry)
          yield* SubscriptionRef.update(reconciled, (revision) => Math.max(revision, snapshot.revision))
        })
      )

    // Registered first so that it runs last: every process started is stopped gracefully, all servers at once.
    yield* Effect.addFinalizer(() =>
      reconcileLock.withPermits(1)(
        Effect.suspend(() => {
          const all = [...entries.values()]
          entries.clear()
          return Effect.forEach(all, (entry) => closeEntry(entry, "Portal is shutting down"), { concurrency: "unbounded", discard: true })
        })
      ).pipe(Effect.zipRight(PubSub.shutdown(hub)))
    )

    /** Waits until the managed servers match configuration `revision` (or a later one). */
    const caughtUp = (revision: number): Effect.Effect<void> =>
      reconciled.changes.pipe(
        Stream.takeUntil((done) => done >= revision),
        Stream.runDrain
      )

    yield* reconcile(yield* store.get)
    yield* Stream.runForEach(store.changes, reconcile).pipe(Effect.forkScoped)

    const statusOf = (serverId: string): Effect.Effect<Option.Option<ServerStatus>> =>
      Effect.suspend(() => {
        const entry = entries.get(serverId)
        return entry === undefined
          ? Effect.succeedNone
          : Effect.map(SubscriptionRef.get(entry.status), ({ state, reason, since }) => Option.some({ state, reason, since }))
      })

    /** A start or stop asked from outside (the admin API): it begins when the state allows it. */
    const command = (serverId: string, begin: (entry: Entry) => Effect.Effect<boolean>): Effect.Effect<CommandResult, NotManaged> =>
      Effect.suspend(() => {
        const entry = entries.get(serverId)
        if (entry === undefined) {
          return Effect.fail(new NotManaged({ serverId, reason: `server ${serverId} has no [server_manager]` }))
        }
        return locked(
          entry,
          Effect.flatMap(begin(entry), (begun) =>
            Effect.map(SubscriptionRef.get(entry.status), ({ state, reason }): CommandResult => ({ begun, state, reason }))
          )
        )
      })

    const dataPlane: ServerManagerDataPlane = {
      manages: (serverId) => entries.has(serverId),
      stateOf: (serverId) => entries.get(serverId)?.state ?? "online"
    }

    return {
      dataPlane,
      /** The state of a server; servers without `[server_manager]` (and unknown ids) are `online`. */
      stateOf: (serverId: string): Effect.Effect<ServerState> => Effect.sync(() => dataPlane.stateOf(serverId)),
      /** State, reason and time of the last change of a managed server. */
      statusOf,
      /** Every transition of every managed server from the moment the stream is run. */
      changes: Stream.fromPubSub(hub),
      /** A subscription taken now (for callers that must not miss a change made right after subscribing). */
      subscribe: PubSub.subscribe(hub),
      /**
       * Wake on join: starts a sleeping server and waits up to `WAKE_WAIT` for it. The one call of the connection path
       * that is an Effect: it waits.
       */
      ensureOnline,
      /** States of the managed servers. */
      states: Effect.suspend(() =>
        Effect.map(
          Effect.forEach([...entries.values()], (entry) => Effect.map(SubscriptionRef.get(entry.status), (status) => [entry.id, status.state] as const)),
          (pairs): ReadonlyMap<string, ServerState> => new Map(pairs)
        )
      ),
      /** Starts a sleeping or crashed server; `begun` is false when its state does not allow a start. */
      start: (serverId: string, reason: string) => command(serverId, (entry) => beginStart(entry, reason)),
      /** Stops an online or starting server; `begun` is false when its state does not allow a stop. */
      stop: (serverId: string, reason: string) => command(serverId, (entry) => beginStop(entry, reason)),
      /** The wait bound in force (WAKE_WAIT unless overridden). */
      wakeWait,
      /**
       * Waits until the managed servers match configuration `revision` (or a later one): a server added with a
       * `[server_manager]` is tracked, with its first state, once this returns.
       */
      caughtUp
    }
  })

/** The connection path's surface: synchronous reads of the lifecycle (`ensureOnline` is the Effect it waits on). */
export interface ServerManagerDataPlane {
  /** Whether the server is managed (has a lifecycle); `ensureOnline` of an unmanaged one is always online. */
  readonly manages: (serverId: string) => boolean
  /** The state of a server; servers without `[server_manager]` (and unknown ids) are `online`. */
  readonly stateOf: (serverId: string) => ServerState
}

export class ServerManager extends Effect.Service<ServerManager>()("portal/ServerManager", {
  scoped: (options: ServerManagerOptions = {}) => make(options)
}) {}
