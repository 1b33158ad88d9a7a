/**
 * Session: the order of a connection's life, from the first byte to the relay. Each phase is a module of its own
 * under session/; each takes the value the previous one produced and returns what the next needs, or undefined when
 * it answered or refused the connection itself. Data moves forward only; no phase calls back.
 *
 *   opening   PROXY header, flood bound, global [ip_filter], IP bans, handshake or legacy ping
 *   routing   [rate_limit], the server the handshake names, its [ip_filter]
 *   status    a server-list answer (modern or legacy), then close            -- pings end here
 *   admission Login Start, player bans, max_players, the registry lease, wake on join
 *   authentication  client_only: encryption and the session service (session/authentication.ts)
 *   join      dial, forwarding, replay, hand-over to the server's relay mode -- the relay owns the rest
 *
 * The login path is written with plain combinators rather than generators: a generator that has suspended keeps what
 * it references reachable through young-generation collections, and at connection rate that carried every login's
 * sockets and state into the old generation (docs/benchmark-history.md, ninth round).
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import { Backend } from "./Backend.js"
import { Balancer } from "./Balancer.js"
import { BanStore } from "./BanStore.js"
import { ConfigStore } from "./ConfigStore.js"
import { Forwarding } from "./Forwarding.js"
import { IpFilter } from "./IpFilter.js"
import { type ConnectionLogFields, currentConnectionLog } from "./log/connectionFields.js"
import { PlayerRegistry } from "./PlayerRegistry.js"
import { RateLimiter } from "./RateLimiter.js"
import { Relay } from "./Relay.js"
import { Router } from "./Router.js"
import { ServerManager } from "./ServerManager.js"
import { makeAdmission } from "./session/admission.js"
import { makeAuthentication, MOJANG_SESSION_SERVER } from "./session/authentication.js"
import { closeWith } from "./session/closing.js"
import type { Connection } from "./session/connection.js"
import type { ReadError } from "./net/SocketReader.js"
import { makeJoin } from "./session/join.js"
import { makeOpening } from "./session/opening.js"
import type { Admitted, Joined, Opened, Routed } from "./session/phases.js"
import { makeRouting } from "./session/routing.js"
import { makeStatusPhase } from "./session/status.js"
import { StatusService } from "./StatusService.js"

export type { Connection } from "./session/connection.js"
export { normaliseIp } from "./session/connection.js"
export { HANDSHAKE_TIMEOUT_MS, LEGACY_PING_WAIT_MS } from "./session/opening.js"
export { LEGACY_STATUS_PROTOCOL } from "./session/status.js"

/**
 * Bad input and vanished peers are everyday events (scanners, timeouts): one debug line with the reason.
 * Anything else is a bug and is logged as an error with its cause; interruption (shutdown) is silent.
 */
const logConnectionFailure = (cause: Cause.Cause<unknown>) => {
  if (Cause.isInterruptedOnly(cause)) return Effect.void
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure) && !Cause.isDie(cause)) {
    const error = failure.value
    return Effect.logDebug(`connection closed: ${error instanceof Error ? error.message : String(error)}`)
  }
  return Effect.logError("connection failed unexpectedly", cause)
}

export class Session extends Effect.Service<Session>()("portal/Session", {
  effect: Effect.gen(function* () {
    const store = yield* ConfigStore
    const clock = yield* Effect.clock
    const rateLimiter = (yield* RateLimiter).dataPlane
    const ipFilter = (yield* IpFilter).dataPlane
    const bans = (yield* BanStore).dataPlane
    const router = (yield* Router).dataPlane
    const balancer = (yield* Balancer).dataPlane
    const manager = yield* ServerManager
    const logDetached = Runtime.runFork(yield* Effect.runtime<never>())
    // The "left" line is logged from outside any fiber: skip forking one for it when info lines are filtered.
    const infoLogged = LogLevel.greaterThanEqual(LogLevel.Info, yield* FiberRef.get(FiberRef.currentMinimumLogLevel))

    const open = makeOpening({ rateLimiter, ipFilter, bans, clock })
    const routing = makeRouting({ rateLimiter, router, ipFilter, clock })
    const status = makeStatusPhase({ status: yield* StatusService, router, balancer, manager: manager.dataPlane })
    const registry = (yield* PlayerRegistry).dataPlane
    const relay = (yield* Relay).dataPlane
    const admit = makeAdmission({ bans, registry, manager, clock })
    const authenticate = makeAuthentication({ bans, registry, clock, sessionServer: process.env.PORTAL_SESSION_SERVER ?? MOJANG_SESSION_SERVER })
    const join = makeJoin({
      backend: yield* Backend,
      forwarding: yield* Forwarding,
      balancer,
      relay,
      registry,
      logDetached,
      infoLogged
    })

    /** A login from admission (or authentication) on: the lease is given back unless the relay took it over. */
    const joined = (admitted: Admitted): Effect.Effect<Joined> =>
      join(admitted).pipe(Effect.onExit((exit) => (Exit.isSuccess(exit) && exit.value === "relayed" ? Effect.void : Effect.sync(admitted.lease.release))))

    /** client_only authenticates first; it replaces the lease when it succeeds, and the old one is given back otherwise. */
    const login = (admitted: Admitted): Effect.Effect<Joined, ReadError> => {
      if (!relay.modeFor(admitted.route.server).mode.authenticates) return joined(admitted)
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
          ? routing.allowLegacyPing(opened)
            ? Effect.as(status.answerLegacy({ ...opened, opening: opened.opening }), "closed" as const)
            : Effect.as(closeWith(opened.connection.socket, undefined), "closed" as const)
          : Effect.flatMap(routing.route({ ...opened, opening: opened.opening }, fields), afterRouting)
      return Effect.ensuring(next, Effect.sync(opened.slot))
    }

    /**
     * Runs one connection until its relay starts (or it ends). Never fails: errors are logged at this boundary.
     * Runs in a fiber of its own (the Listener's FiberSet): its log fields are not restored when it ends.
     */
    const handle = (connection: Connection): Effect.Effect<void> => {
      const socket = connection.socket
      // The connection's log fields, filled in as they become known. The fiber ends with the connection.
      const fields: ConnectionLogFields = { conn: connection.id }
      return Effect.zipRight(
        FiberRef.set(currentConnectionLog, fields),
        Effect.flatMap(store.get, (snapshot) =>
          Effect.flatMap(open(connection, snapshot, fields), (opened) =>
            opened === undefined ? Effect.succeed<Joined>("closed") : afterOpening(opened, fields)
          )
        )
      ).pipe(
        Effect.catchAllCause((cause) => Effect.as(Effect.zipRight(logConnectionFailure(cause), closeWith(socket, undefined)), "closed" as const)),
        // The socket is closed here unless a relay took it over.
        Effect.onExit((exit) => (Exit.isSuccess(exit) && exit.value === "relayed" ? Effect.void : Effect.sync(() => socket.destroy())))
      )
    }

    return { handle }
  })
}) {}
