/**
 * The routing phase: the `[rate_limit]` for the kind of connection, the server its handshake names (or the unknown
 * domain behaviour), and that server's own `[ip_filter]`.
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { NEXT_STATE_STATUS, splitAddress } from "../../protocol/handshake.js"
import type { IpFilterDataPlane } from "../IpFilter.js"
import type { ConnectionLogFields } from "../log/connectionFields.js"
import type { RateLimiterDataPlane } from "../RateLimiter.js"
import type { RouterDataPlane } from "../Router.js"
import type { StatsDataPlane } from "../Stats.js"
import { traceRefusal } from "../telemetry/connectionTrace.js"
import { closeWith, disconnect, refuse } from "./closing.js"
import { MESSAGES } from "./messages.js"
import type { ModernOpened, Opened, Routed } from "./phases.js"

export interface RoutingServices {
  readonly rateLimiter: RateLimiterDataPlane
  readonly router: RouterDataPlane
  readonly ipFilter: IpFilterDataPlane
  readonly clock: Clock.Clock
  readonly stats: StatsDataPlane
}

export interface Routing {
  /** A modern handshake: its route, or undefined when it was refused or dropped (and closed). */
  readonly route: (opened: ModernOpened, fields: ConnectionLogFields) => Effect.Effect<Routed | undefined>
  /** A legacy ping counts against the status rate limit like any ping; false when it was closed for it. */
  readonly allowLegacyPing: (opened: Opened) => boolean
}

export const makeRouting = ({ rateLimiter, router, ipFilter, clock, stats }: RoutingServices): Routing => ({
  allowLegacyPing: (opened) => {
    const allowed = rateLimiter.allow("status", opened.peer.clientIp, clock.unsafeCurrentTimeMillis(), opened.snapshot.global)
    if (!allowed) {
      stats.rejected("rate_limited")
      traceRefusal(opened.connection.trace, "rate_limited")
    }
    return allowed
  },

  route: (opened, fields) => {
    const { connection, peer, snapshot, opening } = opened
    const socket = connection.socket
    const ip = peer.clientIp
    const handshake = opening.handshake
    const { host } = splitAddress(handshake.address)
    const isStatus = handshake.nextState === NEXT_STATE_STATUS
    const trace = connection.trace
    if (!rateLimiter.allow(isStatus ? "status" : "login", ip, clock.unsafeCurrentTimeMillis(), snapshot.global)) {
      stats.rejected("rate_limited")
      traceRefusal(trace, "rate_limited")
      return Effect.as(
        Effect.zipRight(
          isStatus ? Effect.logDebug("status ping over [rate_limit]: closed") : Effect.logInfo("login over [rate_limit] refused"),
          refuse(socket, opening, MESSAGES.rateLimited)
        ),
        undefined
      )
    }
    const server = router.resolve(snapshot, host)
    if (server === undefined) {
      if (snapshot.global.unknown_domain_behavior === "drop") {
        stats.rejected("unknown_domain")
        traceRefusal(trace, "unknown_domain")
        return Effect.as(Effect.zipRight(Effect.logDebug(`unknown domain "${host}": dropped`), closeWith(socket, undefined)), undefined)
      }
      if (isStatus) return Effect.succeed({ _tag: "Status", opened, server: undefined })
      stats.rejected("unknown_domain")
      traceRefusal(trace, "unknown_domain")
      return Effect.as(
        Effect.zipRight(Effect.logInfo(`login for unknown domain "${host}" refused`), disconnect(socket, MESSAGES.unknownDomain(host))),
        undefined
      )
    }
    fields.server = server.id
    if (trace !== undefined) {
      trace.server = server.id
      trace.proxyMode = server.config.proxy_mode
    }
    if (!ipFilter.allowedFor(server, ip)) {
      stats.rejected("ip_filter")
      traceRefusal(trace, "ip_filter")
      // As in the opening: a refused login is an info line, a refused ping a debug one.
      const line = `refused by the [ip_filter] of ${server.id}`
      return Effect.as(Effect.zipRight(isStatus ? Effect.logDebug(line) : Effect.logInfo(line), refuse(socket, opening, MESSAGES.notAllowed)), undefined)
    }
    return Effect.succeed(isStatus ? { _tag: "Status", opened, server } : { _tag: "Login", opened, server })
  }
})
