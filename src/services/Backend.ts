/**
 * Backend: connects to a server's addresses in the Balancer's order, each attempt bounded by the server's connect
 * timeout, up to `connect_max_attempts` addresses, reporting every result to the Balancer.
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as net from "node:net"
import type { ServerDefinition } from "../schema/decode.js"
import type { GlobalConfig } from "../schema/GlobalConfig.js"
import { formatHostPort } from "../schema/HostPort.js"
import type { BackendAddress } from "../schema/ServerConfig.js"
import { Balancer } from "./Balancer.js"
import { monotonicMillisOf } from "./monotonicClock.js"
import { applyKeepalive, keepaliveParams } from "./native/keepalive.js"
import { connectSteady } from "./net/steadySockets.js"

export interface AttemptFailure {
  readonly address: string
  readonly reason: string
  /** When the attempt started and ended (`performance.now()`): telemetry's connect durations. */
  readonly start: number
  readonly end: number
}

export class BackendUnavailable extends Data.TaggedError("BackendUnavailable")<{
  readonly serverId: string
  readonly attempts: ReadonlyArray<AttemptFailure>
}> {
  override get message() {
    return this.attempts.length === 0
      ? `server ${this.serverId} has no address to try`
      : `no address of server ${this.serverId} answered: ${this.attempts.map((a) => `${a.address} (${a.reason})`).join(", ")}`
  }
}

/**
 * The player of a login left (or misbehaved) while the backend was dialled: the attempt in flight was dropped, so
 * that its place under max_players and its least_conn count are given back at once rather than after the timeouts.
 */
export class DialAbandoned extends Data.TaggedError("DialAbandoned")<{
  readonly serverId: string
  readonly attempts: ReadonlyArray<AttemptFailure>
  /** What the player did: closed the connection, sent too much. */
  readonly why: string
}> {}

/**
 * Watches the player while its backend is dialled: calls `left` (at most once, possibly at once) when the player
 * is gone; returns the canceler.
 */
export type PlayerWatch = (left: (why: string) => void) => () => void

export interface BackendConnection {
  readonly socket: net.Socket
  readonly address: BackendAddress
  /** Takes the socket out of the scope's care: a relay that outlives the scope owns it from now on. */
  readonly detach: () => void
}

/** A dialed backend socket, owned by the caller from now on, and the addresses that failed before it. */
export interface Dialed {
  readonly socket: net.Socket
  readonly address: BackendAddress
  readonly failures: ReadonlyArray<AttemptFailure>
  /** When the attempt that connected started and ended (`performance.now()`). */
  readonly start: number
  readonly end: number
  /**
   * Gives back the session counted on `address` for least_conn and slow start (idempotent; nothing to give back
   * unless the dial counted sessions): whoever ends the session calls it.
   */
  readonly release: () => void
}

const nothingCounted = (): void => {}

const describeError = (error: unknown): string => {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code
    return code !== undefined ? code : error.message
  }
  return String(error)
}

export const connectTimeoutOf = (server: ServerDefinition, global: GlobalConfig): Duration.Duration =>
  server.config.timeouts.connect ?? global.connect_timeout

/**
 * The permanent error listener of a connected backend socket. Defined out here because a function made inside
 * `dial` would keep dial's whole closure alive, with the connection's finished fiber, for as long as the player stays.
 */
const ignoreError = (): void => {}

/**
 * Opens a connection to one address: a socket that emits `connect` once connected, or `error`. The production
 * dialer is TCP (`net.connect`); tests swap in an in-memory one (`Backend.layerTest`).
 */
export type Connector = (address: BackendAddress) => net.Socket

const tcpConnector: Connector = (address) => connectSteady(address.host, address.port, true)

const make = (connectTo: Connector) =>
  Effect.gen(function* () {
    const balancer = yield* Balancer
    const clock = yield* Effect.clock

    /**
     * Connects to the first address that answers, in the Balancer's order, reporting every result to it. One
     * suspension for all attempts, with plain timers: this runs for every login. Interrupting it destroys the
     * socket being connected; once it succeeds the caller owns the socket. A permanent error listener keeps a late
     * socket error from ever becoming an uncaught exception. With `abandon`, the dial is dropped when its watch says
     * the player left (inside the same callbacks, so a socket is never both handed over and dropped).
     */
    const dialing = <E>(
      server: ServerDefinition,
      global: GlobalConfig,
      countSession: boolean,
      abandon: { readonly watch: PlayerWatch; readonly error: (attempts: ReadonlyArray<AttemptFailure>, why: string) => E } | undefined
    ): Effect.Effect<Dialed, BackendUnavailable | E> =>
      Effect.async<Dialed, BackendUnavailable | E>((resume) => {
        const order = balancer.dataPlane.order(server, monotonicMillisOf(clock))
        const limit = global.connect_max_attempts === 0 ? order.length : Math.min(order.length, global.connect_max_attempts)
        const timeoutMs = Duration.toMillis(connectTimeoutOf(server, global))
        const failures: Array<AttemptFailure> = []
        let socket: net.Socket | undefined
        let timer: NodeJS.Timeout | undefined
        let index = 0
        // A login counts on the address it tries from the attempt on, not once connected: logins that arrive
        // together must see each other in least_conn's counts and slow start's ramp.
        let counted: () => void = nothingCounted
        let abandoned = false
        let stopWatching: () => void = nothingCounted
        const playerLeft = (why: string) => {
          abandoned = true
          clearTimeout(timer)
          socket?.destroy()
          socket = undefined
          counted()
          counted = nothingCounted
          if (abandon !== undefined) resume(Effect.fail(abandon.error(failures, why)))
        }

        const attempt = (): void => {
          if (index >= limit) {
            stopWatching()
            return resume(Effect.fail(new BackendUnavailable({ serverId: server.id, attempts: failures })))
          }
          const address = order[index++]!
          const start = performance.now()
          if (countSession) counted = balancer.dataPlane.acquire(server, address)
          const current = connectTo(address)
          socket = current
          const settle = () => {
            clearTimeout(timer)
            current.off("error", onError)
            current.off("connect", onConnect)
          }
          const failed = (reason: string) => {
            settle()
            current.destroy()
            socket = undefined
            counted()
            counted = nothingCounted
            failures.push({ address: formatHostPort(address), reason, start, end: performance.now() })
            balancer.dataPlane.failed(server, address, monotonicMillisOf(clock))
            attempt()
          }
          const onError = (error: Error) => failed(describeError(error))
          const onConnect = () => {
            const end = performance.now()
            settle()
            current.on("error", ignoreError) // errors surface through the relay
            applyKeepalive(current, keepaliveParams(global))
            balancer.dataPlane.succeeded(server, address, monotonicMillisOf(clock))
            socket = undefined
            const release = counted
            counted = nothingCounted
            stopWatching()
            resume(Effect.succeed({ socket: current, address, failures, start, end, release }))
          }
          timer = setTimeout(() => failed(`no answer within ${Duration.format(Duration.millis(timeoutMs))}`), timeoutMs)
          current.once("error", onError)
          current.once("connect", onConnect)
        }
        if (abandon !== undefined) {
          stopWatching = abandon.watch(playerLeft)
          if (abandoned) return
        }
        attempt()
        return Effect.sync(() => {
          stopWatching()
          clearTimeout(timer)
          socket?.destroy()
          counted()
        })
      })

    const dial = (server: ServerDefinition, global: GlobalConfig, countSession = false): Effect.Effect<Dialed, BackendUnavailable> =>
      dialing<never>(server, global, countSession, undefined)

    /** A login's dial: counted for least_conn and slow start, and dropped if `watch` says the player left meanwhile. */
    const dialFor = (watch: PlayerWatch | undefined, server: ServerDefinition, global: GlobalConfig): Effect.Effect<Dialed, BackendUnavailable | DialAbandoned> =>
      dialing(server, global, true, watch === undefined ? undefined : { watch, error: (attempts, why) => new DialAbandoned({ serverId: server.id, attempts, why }) })

    /** Failed attempts before a success, for the debug log. */
    const logFailures = (server: ServerDefinition, failures: ReadonlyArray<AttemptFailure>) =>
      failures.length === 0
        ? Effect.void
        : Effect.forEach(failures, (failure) => Effect.logDebug(`backend ${failure.address} of ${server.id} failed: ${failure.reason}`), {
            discard: true
          })

    /** `dial`, with the socket living as long as the current scope unless detached. */
    const connect = (
      server: ServerDefinition,
      global: GlobalConfig
    ): Effect.Effect<BackendConnection, BackendUnavailable, Scope.Scope> =>
      Effect.gen(function* () {
        const holder: { socket: net.Socket | undefined } = { socket: undefined }
        yield* Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, Effect.sync(() => holder.socket?.destroy())))
        const dialed = yield* dial(server, global)
        holder.socket = dialed.socket
        yield* logFailures(server, dialed.failures)
        return { socket: dialed.socket, address: dialed.address, detach: () => (holder.socket = undefined) }
      })

    return { connect, dial, dialFor, logFailures }
  })

export class Backend extends Effect.Service<Backend>()("portal/Backend", {
  effect: make(tcpConnector)
}) {
  /**
   * The same dialing (Balancer order, attempts, timeouts, results reported) over another connector: an in-memory
   * one lets a test run the connection path without sockets.
   */
  static readonly layerTest = (connectTo: Connector) => Layer.effect(Backend, Effect.map(make(connectTo), (service) => Backend.make(service)))
}
