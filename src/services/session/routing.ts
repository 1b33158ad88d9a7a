/**
 * The routing phase: the `[rate_limit]` for the kind of connection, the server its handshake names (or the unknown
 * domain behaviour), and that server's own `[ip_filter]`.
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { NEXT_STATE_STATUS, splitAddress } from "../../protocol/handshake.js"
import type { IpFilterDataPlane } from "../IpFilter.js"
import { type ConnectionLogFields, quotedForLog } from "../log/connectionFields.js"
import type { RefusalLines } from "../log/refusalLines.js"
import type { RateLimiterDataPlane } from "../RateLimiter.js"
import type { RouterDataPlane } from "../Router.js"
import type { StatsDataPlane } from "../Stats.js"
import { traceRefusal } from "../telemetry/connectionTrace.js"
import { closeWith, disconnect, refuse } from "./closing.js"
import { MESSAGES } from "./messages.js"
import type { LegacyOpened, LegacyRoute, ModernOpened, Routed } from "./phases.js"

export interface RoutingServices {
  readonly rateLimiter: RateLimiterDataPlane
  readonly router: RouterDataPlane
  readonly ipFilter: IpFilterDataPlane
  readonly clock: Clock.Clock
  readonly stats: StatsDataPlane
  readonly refusals: RefusalLines
}

export interface Routing {
  /** A modern handshake: its route, or undefined when it was refused or dropped (and closed). */
  readonly route: (opened: ModernOpened, fields: ConnectionLogFields) => Effect.Effect<Routed | undefined>
  /**
   * A legacy ping, as a modern one: the status rate limit, then (a 1.6 ping names a host) the server and that
   * server's `[ip_filter]`, or the unknown domain behaviour; undefined when it was refused or dropped (and closed).
   */
  readonly routeLegacy: (opened: LegacyOpened) => Effect.Effect<LegacyRoute | undefined>
}

export const makeRouting = ({ rateLimiter, router, ipFilter, clock, stats, refusals }: RoutingServices): Routing => ({
  routeLegacy: (opened) => {
    const { connection, peer, snapshot, opening } = opened
    const trace = connection.trace
    const closed = (reason: "rate_limited" | "unknown_domain" | "ip_filter", line: string) => {
      stats.rejected(reason)
      traceRefusal(trace, reason)
      return Effect.as(Effect.zipRight(Effect.logDebug(line), closeWith(connection.socket, undefined)), undefined)
    }
    if (!rateLimiter.allow("status", peer.clientIp, clock.unsafeCurrentTimeMillis(), snapshot.global)) {
      return closed("rate_limited", "legacy ping over [rate_limit]: closed")
    }
    const ping = opening.ping
    const host = ping._tag === "V1_6" ? splitAddress(ping.host).host : ""
    const server = host.length > 0 ? router.resolve(snapshot, host) : undefined
    if (trace !== undefined) {
      trace.server = server?.id
      trace.proxyMode = server?.config.proxy_mode
    }
    if (server === undefined) {
      return snapshot.global.unknown_domain_behavior === "drop"
        ? closed("unknown_domain", `legacy ping for unknown domain ${quotedForLog(host)}: dropped`)
        : Effect.succeed({ opened, host, server: undefined })
    }
    if (!ipFilter.allowedFor(server, peer.clientIp)) return closed("ip_filter", `refused by the [ip_filter] of ${server.id}`)
    return Effect.succeed({ opened, host, server })
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
          isStatus ? Effect.logDebug("status ping over [rate_limit]: closed") : refusals.say("rate_limited", "info", "login over [rate_limit] refused"),
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
        return Effect.as(Effect.zipRight(Effect.logDebug(`unknown domain ${quotedForLog(host)}: dropped`), closeWith(socket, undefined)), undefined)
      }
      if (isStatus) return Effect.succeed({ _tag: "Status", opened, server: undefined })
      stats.rejected("unknown_domain")
      traceRefusal(trace, "unknown_domain")
      return Effect.as(
        Effect.zipRight(
          refusals.say("unknown_domain", "info", `login for unknown domain ${quotedForLog(host)} refused`),
          disconnect(socket, MESSAGES.unknownDomain(host))
        ),
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
      // As in the opening: a refused login is an info line (while few come), a refused ping a debug one.
      const line = `refused by the [ip_filter] of ${server.id}`
      return Effect.as(
        Effect.zipRight(isStatus ? Effect.logDebug(line) : refusals.say("ip_filter", "info", line), refuse(socket, opening, MESSAGES.notAllowed)),
        undefined
      )
    }
    return Effect.succeed(isStatus ? { _tag: "Status", opened, server } : { _tag: "Login", opened, server })
  }
})
