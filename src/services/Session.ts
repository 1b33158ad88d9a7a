/**
 * Session: the order of a connection's life, from the first byte to the relay, on this thread. Each phase is a module
 * of its own under session/; each takes the value the previous one produced and returns what the next needs, or
 * undefined when it answered or refused the connection itself. Data moves forward only; no phase calls back.
 * session/pipeline.ts puts them in this order; this service gives it this thread's services.
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
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as LogLevel from "effect/LogLevel"
import * as Runtime from "effect/Runtime"
import { Backend } from "./Backend.js"
import { Balancer } from "./Balancer.js"
import { BanStore } from "./BanStore.js"
import { ConfigStore, followSnapshot } from "./ConfigStore.js"
import { Forwarding } from "./Forwarding.js"
import { IpFilter } from "./IpFilter.js"
import { PlayerRegistry } from "./PlayerRegistry.js"
import { RateLimiter } from "./RateLimiter.js"
import { Relay } from "./Relay.js"
import { Router } from "./Router.js"
import { ServerManager } from "./ServerManager.js"
import { MOJANG_SESSION_SERVER } from "./session/authentication.js"
import { localNetwork } from "./relay/packet/channelNetwork.js"
import { makePipeline } from "./session/pipeline.js"
import { Stats } from "./Stats.js"
import { StatusService } from "./StatusService.js"
import { Telemetry } from "./Telemetry.js"

export type { Connection } from "./session/connection.js"
export { normaliseIp } from "./session/connection.js"
export { HANDSHAKE_TIMEOUT_MS, LEGACY_PING_WAIT_MS } from "./session/opening.js"
export { LEGACY_STATUS_PROTOCOL } from "./session/status.js"

export class Session extends Effect.Service<Session>()("portal/Session", {
  scoped: Effect.gen(function* () {
    const store = yield* ConfigStore
    const registry = (yield* PlayerRegistry).dataPlane
    const handle = makePipeline({
      clock: yield* Effect.clock,
      snapshot: yield* followSnapshot(store),
      rateLimiter: (yield* RateLimiter).dataPlane,
      ipFilter: (yield* IpFilter).dataPlane,
      bans: (yield* BanStore).dataPlane,
      router: (yield* Router).dataPlane,
      balancer: (yield* Balancer).dataPlane,
      registry,
      // One thread: every session is in this registry, every player relayed here.
      channel: localNetwork(registry.sessions),
      status: yield* StatusService,
      manager: yield* ServerManager,
      backend: yield* Backend,
      forwarding: yield* Forwarding,
      relay: (yield* Relay).dataPlane,
      logDetached: Runtime.runFork(yield* Effect.runtime<never>()),
      // The "left" line is logged from outside any fiber: skip forking one for it when info lines are filtered.
      infoLogged: LogLevel.greaterThanEqual(LogLevel.Info, yield* FiberRef.get(FiberRef.currentMinimumLogLevel)),
      debugLogged: LogLevel.greaterThanEqual(LogLevel.Debug, yield* FiberRef.get(FiberRef.currentMinimumLogLevel)),
      stats: (yield* Stats).dataPlane,
      tracing: (yield* Telemetry).dataPlane,
      sessionServer: process.env.PORTAL_SESSION_SERVER ?? MOJANG_SESSION_SERVER
    })
    return { handle }
  })
}) {}
