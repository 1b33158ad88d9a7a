/**
 * The pipeline: the phases of a connection in their order, built from what they read and call. Session (the main
 * thread's service) and a worker thread's data plane build it the same way, each from its own implementations of
 * the same surfaces.
 */
import type * as Clock from "effect/Clock"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import type { BanDataPlane } from "../BanStore.js"
import type { BalancerDataPlane } from "../Balancer.js"
import type { ConfigSnapshot } from "../ConfigStore.js"
import type { IpFilterDataPlane } from "../IpFilter.js"
import { type ConnectionLogFields, currentConnectionLog } from "../log/connectionFields.js"
import { threadRefusalLines } from "../log/refusalLines.js"
import type { PlayerRegistryDataPlane } from "../PlayerRegistry.js"
import type { RateLimiterDataPlane } from "../RateLimiter.js"
import type { RouterDataPlane } from "../Router.js"
import type { StatsDataPlane } from "../Stats.js"
import type { ReadError } from "../net/SocketReader.js"
import type { TracingDataPlane } from "../telemetry/connectionTrace.js"
import { type Link, LiveList } from "../collections/LiveList.js"
import { type AdmissionServices, makeAdmission } from "./admission.js"
import { makeAuthentication } from "./authentication.js"
import { closeThen, closeWith } from "./closing.js"
import type { Connection, ConnectionHandler, Fork } from "./connection.js"
import { type JoinServices, makeJoin } from "./join.js"
import { type Arrived, makeOpening, type OpeningEnd, type OpeningSink } from "./opening.js"
import type { Admitted, Joined, Opened, Routed } from "./phases.js"
import type { Socket } from "node:net"
import { makeRouting } from "./routing.js"
import { makeStatusPhase, type StatusServices } from "./status.js"

/** Everything the phases read and call. */
export interface PipelineServices {
  readonly clock: Clock.Clock
  /** The configuration a new connection is set up with (the current one, read without a fiber). */
  readonly snapshot: () => ConfigSnapshot
  readonly rateLimiter: RateLimiterDataPlane
  readonly ipFilter: IpFilterDataPlane
  readonly bans: BanDataPlane
  readonly router: RouterDataPlane
  readonly balancer: BalancerDataPlane
  readonly registry: Pick<PlayerRegistryDataPlane, "admit" | "countFor" | "claimOnline">
  /** The BungeeCord channel's reach: this thread's registry on one thread, the main thread's with workers. */
  readonly channel: JoinServices["channel"]
  readonly status: StatusServices["status"]
  readonly manager: AdmissionServices["manager"]
  readonly backend: JoinServices["backend"]
  readonly forwarding: JoinServices["forwarding"]
  readonly relay: JoinServices["relay"]
  readonly logDetached: JoinServices["logDetached"]
  readonly infoLogged: boolean
  /** Whether debug lines are logged at all: the opening's, written outside any fiber, are skipped cheaply when not. */
  readonly debugLogged: boolean
  readonly stats: StatsDataPlane
  /** This thread's connection tracing; undefined when traces are off. */
  readonly tracing: TracingDataPlane | undefined
  /** The session service client_only logins are checked with (`PORTAL_SESSION_SERVER`, else Mojang's). */
  readonly sessionServer: string
}

/**
 * Bad input and vanished peers are everyday events (scanners, timeouts): one debug line with the reason.
 * Anything else is a bug and is logged as an error with its cause; interruption (shutdown) is silent.
 */
const logConnectionFailure = (cause: Cause.Cause<unknown>, connection: Connection, stats: StatsDataPlane) => {
  if (Cause.isInterruptedOnly(cause)) return Effect.void
  stats.failed()
  const failure = Cause.failureOption(cause)
  const trace = connection.trace
  if (Option.isSome(failure) && !Cause.isDie(cause)) {
    const error = failure.value
    const reason = error instanceof Error ? error.message : String(error)
    if (trace !== undefined) {
      trace.outcome = "error"
      trace.reason = reason
    }
    return Effect.logDebug(`connection closed: ${reason}`)
  }
  if (trace !== undefined) {
    trace.outcome = "error"
    trace.reason = "an unexpected failure (see the log)"
  }
  return Effect.logError("connection failed unexpectedly", cause)
}

const isSilentClose = (error: ReadError): boolean => error._tag === "ConnectionClosed" && error.silent === true

export const makePipeline = (services: PipelineServices): ConnectionHandler => {
  const { clock, rateLimiter, ipFilter, bans, router, balancer, stats, tracing } = services
  // One budget per thread for the lines of refused logins: a flood of refusals is a handful of lines and a count.
  const refusals = threadRefusalLines(services.logDetached)
  const open = makeOpening({ rateLimiter, ipFilter, bans, clock, stats, tracing, refusals })
  const routing = makeRouting({ rateLimiter, router, ipFilter, clock, stats, refusals })
  const status = makeStatusPhase({ status: services.status, balancer, manager: services.manager.dataPlane, stats })
  const admit = makeAdmission({ bans, registry: services.registry, manager: services.manager, clock, stats, refusals })
  const authenticate = makeAuthentication({ bans, clock, sessionServer: services.sessionServer, refusals, registry: services.registry, stats })
  const join = makeJoin({
    stats,
    backend: services.backend,
    forwarding: services.forwarding,
    relay: services.relay,
    registry: services.registry,
    channel: services.channel,
    logDetached: services.logDetached,
    infoLogged: services.infoLogged,
    tracing
  })

  /** A login from admission (or authentication) on: the lease is given back unless the relay took it over. */
  const joined = (admitted: Admitted): Effect.Effect<Joined> =>
    join(admitted).pipe(Effect.onExit((exit) => (Exit.isSuccess(exit) && exit.value === "relayed" ? Effect.void : Effect.sync(admitted.lease.release))))

  /** client_only authenticates first (the lease follows the login; it is given back unless the relay took it). */
  const login = (admitted: Admitted): Effect.Effect<Joined, ReadError> => {
    if (!services.relay.modeFor(admitted.route.server).mode.authenticates) return joined(admitted)
    return authenticate(admitted).pipe(
      Effect.onExit((exit) => (Exit.isSuccess(exit) && exit.value !== undefined ? Effect.void : Effect.sync(admitted.lease.release))),
      Effect.flatMap((authenticated) => (authenticated === undefined ? Effect.succeed<Joined>("closed") : joined(authenticated)))
    )
  }

  const afterRouting = (routed: Routed | undefined) => {
    if (routed === undefined) return Effect.succeed<Joined>("closed")
    if (routed._tag === "Status") return Effect.as(status.answer(routed), "closed" as const)
    return Effect.flatMap(admit(routed), (admitted) => (admitted === undefined ? Effect.succeed<Joined>("closed") : login(admitted)))
  }

  /** Everything after the opening; the handshake slot is given back when it ends (admission gives it back sooner). */
  const afterOpening = (opened: Opened, fields: ConnectionLogFields) => {
    const next =
      opened.opening._tag === "LegacyPing"
        ? Effect.as(
            Effect.flatMap(routing.routeLegacy({ ...opened, opening: opened.opening }), (route) => (route === undefined ? Effect.void : status.answerLegacy(route))),
            "closed" as const
          )
        : Effect.flatMap(routing.route({ ...opened, opening: opened.opening }, fields), afterRouting)
    return Effect.ensuring(next, Effect.sync(opened.slot))
  }

  /** The end of a connection's setup that no relay took over: the socket is closed, the trace handed over. */
  const setupEnded = (connection: Connection) => () => {
    connection.socket.destroy()
    const trace = connection.trace
    if (trace !== undefined && tracing !== undefined) {
      trace.end = performance.now()
      tracing.finish(trace)
    }
  }

  /** The connection's fiber, from its handshake on. */
  const afterArrival = (arrived: Arrived, fields: ConnectionLogFields): Effect.Effect<void> => {
    const connection = arrived.connection
    return Effect.zipRight(
      FiberRef.set(currentConnectionLog, fields),
      Effect.flatMap(open.screen(arrived), (opened) => (opened === undefined ? Effect.succeed<Joined>("closed") : afterOpening(opened, fields)))
    ).pipe(
      Effect.catchAllCause((cause) =>
        Effect.as(Effect.zipRight(logConnectionFailure(cause, connection, stats), closeWith(connection.socket, undefined)), "closed" as const)
      ),
      // The socket is closed here unless a relay took it over (the relay's end hands the trace over then).
      Effect.onExit((exit) => (Exit.isSuccess(exit) && exit.value === "relayed" ? Effect.void : Effect.sync(setupEnded(connection))))
    )
  }

  /** A debug line with the connection's fields, from outside any fiber (forked only when debug lines are kept). */
  const logDebug = (fields: ConnectionLogFields, message: string): void => {
    if (services.debugLogged) services.logDetached(Effect.locally(Effect.logDebug(message), currentConnectionLog, fields))
  }

  // Connections without a fiber: in their opening, or closing after it (a LiveList: see there why not a Set).
  const openings = new LiveList<Socket>()

  /** An opening that ended before its handshake: said as a connection failure would be, then closed. */
  const openingEnded = (connection: Connection, fields: ConnectionLogFields, link: Link<Socket>, end: OpeningEnd): void => {
    if (end._tag === "Failed" && isSilentClose(end.error)) {
      // A port check, or a client that connected and gave up: no bad input, so no failure (the trace says "closed").
      logDebug(fields, "the client closed the connection without sending anything")
    } else if (end._tag === "Failed") {
      stats.failed()
      const reason = end.error.message
      const trace = connection.trace
      if (trace !== undefined) {
        trace.outcome = "error"
        trace.reason = reason
      }
      logDebug(fields, `connection closed: ${reason}`)
    } else {
      logDebug(fields, "too many handshakes in progress: closed")
    }
    const ended = setupEnded(connection)
    if (end._tag !== "Failed") {
      // Refused a handshake place: nothing to say, and the socket was never read, so a close from the peer would go
      // unseen and its max_connections place stay taken until the flush timer. It is closed now.
      connection.socket.destroy()
      openings.remove(link)
      ended()
      return
    }
    closeThen(connection.socket, undefined, () => {
      openings.remove(link)
      ended()
    })
  }

  /** A bug in the opening (it never throws by design): logged as an error, and the connection closed. */
  const openingDefect = (connection: Connection, fields: ConnectionLogFields, link: Link<Socket>, error: unknown): void => {
    stats.failed()
    openings.remove(link)
    const trace = connection.trace
    if (trace !== undefined) {
      trace.outcome = "error"
      trace.reason = "an unexpected failure (see the log)"
    }
    services.logDetached(Effect.locally(Effect.logError("connection failed unexpectedly", Cause.die(error)), currentConnectionLog, fields))
    setupEnded(connection)()
  }

  /** Where a connection's opening reports: one object per connection rather than two closures (a flood holds many). */
  class FollowedOpening implements OpeningSink {
    constructor(
      private readonly connection: Connection,
      private readonly fields: ConnectionLogFields,
      private readonly link: Link<Socket>,
      private readonly fork: Fork
    ) {}

    arrived(arrived: Arrived): void {
      openings.remove(this.link)
      this.fork(afterArrival(arrived, this.fields))
    }

    ended(end: OpeningEnd): void {
      openingEnded(this.connection, this.fields, this.link, end)
    }
  }

  let unclosed = 0
  /** One listener for every socket (no closure per connection): the count, and the stats' active connections. */
  const closed = () => {
    unclosed -= 1
    stats.connectionClosed()
  }

  const accept = (connection: Connection, fork: Fork): void => {
    const socket = connection.socket
    const accepted = performance.now()
    // The connection's log fields, filled in as they become known.
    const fields: ConnectionLogFields = { conn: connection.id }
    // A connection counts as active until its socket closes, whoever closes it (the session or a relay). `on`, not
    // `once`: a socket closes once, and once's wrapper would be three more objects per connection.
    stats.connectionOpened()
    unclosed += 1
    socket.on("close", closed)
    // Traced from the start at the ping ratio; a login not picked here is traced from its handshake (opening.ts).
    if (tracing !== undefined && tracing.sampled()) connection.trace = tracing.begin(connection.id, accepted)
    const link = openings.add(socket)
    try {
      open.read(connection, services.snapshot(), fields, accepted, new FollowedOpening(connection, fields, link, fork))
    } catch (error) {
      openingDefect(connection, fields, link, error)
    }
  }

  return {
    accept,
    opening: () => openings.size,
    closeOpenings: () => {
      for (const socket of openings.values()) socket.destroy()
    },
    unclosed: () => unclosed
  }
}
