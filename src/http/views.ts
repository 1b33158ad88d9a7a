/**
 * The admin API's views of Portal's state: what the services hold, in the shapes of schemas.ts. `makeViews` reads the
 * services' Effect surfaces only (never a `dataPlane`), so the views stay right when the data plane moves to workers.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { availableParallelism } from "node:os"
import type { ServerDefinition } from "../schema/decode.js"
import { GlobalConfig, PORTAL_VERSION } from "../schema/GlobalConfig.js"
import { formatHostPort } from "../schema/HostPort.js"
import { ServerConfig } from "../schema/ServerConfig.js"
import { Balancer } from "../services/Balancer.js"
import type { Ban } from "../services/BanStore.js"
import { inactiveFeatures } from "../services/config/features.js"
import { ConfigStore, type ConfigSnapshot } from "../services/ConfigStore.js"
import { Lifecycle } from "../services/Lifecycle.js"
import { PlayerRegistry, type SessionSnapshot } from "../services/PlayerRegistry.js"
import { ServerManager } from "../services/ServerManager.js"
import { Stats } from "../services/Stats.js"
import { WorkerCensus } from "../services/WorkerPool.js"
import type { BanView, PlayerView, ServerView, StatsView } from "./schemas.js"

export const playerView = (session: SessionSnapshot): PlayerView => ({
  id: session.id,
  name: session.name ?? null,
  uuid: session.uuid ?? null,
  address: session.clientAddress,
  port: session.clientPort,
  server: session.serverId,
  backend: session.backendAddress ?? null,
  protocol_version: session.protocolVersion,
  since: new Date(session.since).toISOString(),
  bytes_in: session.bytesIn,
  bytes_out: session.bytesOut
})

export const banView = (ban: Ban): BanView => ({
  target: { type: ban.target.type, value: ban.target.value },
  reason: ban.reason,
  created_at: ban.created_at,
  expires_at: ban.expires_at,
  source: ban.source
})

/** Whether a live session is the player `key` names: a UUID (with or without dashes) or a name, any case. */
export const matchesPlayer = (session: SessionSnapshot, key: string): boolean => {
  const wanted = key.trim().toLowerCase()
  if (session.name !== undefined && session.name.toLowerCase() === wanted) return true
  return session.uuid !== undefined && session.uuid.replaceAll("-", "").toLowerCase() === wanted.replaceAll("-", "")
}

const REDACTED = "<redacted>"
const SECRET_KEYS = new Set(["api_key", "secret", "token", "password"])

/** A copy of a table with every secret-looking key's value replaced, at any depth. */
export const redact = (table: object): Record<string, unknown> =>
  Object.fromEntries(
    Object.entries(table).map(([key, inner]) => [key, SECRET_KEYS.has(key) && inner !== undefined && inner !== null ? REDACTED : redactValue(inner)])
  )

const redactValue = (value: unknown): unknown =>
  Array.isArray(value) ? value.map(redactValue) : value !== null && typeof value === "object" ? redact(value) : value

const encodeGlobal = Schema.encodeEither(GlobalConfig)
const encodeServer = Schema.encodeEither(ServerConfig)

/** What configured capabilities run: shown beside the inactive ones. */
const activeFeatures = (snapshot: ConfigSnapshot): Array<string> => {
  const global = snapshot.global
  const servers = [...snapshot.servers.values()]
  const active: Array<string> = ["routing", "status_cache", "ban"]
  if (global.rate_limit.enabled) active.push("rate_limit")
  if (global.ip_filter.whitelist.length + global.ip_filter.blacklist.length > 0) active.push("ip_filter")
  if (global.forwarding.mode === "legacy" || global.forwarding.mode === "legacy_guard") active.push(`forwarding (${global.forwarding.mode})`)
  if (servers.some((server) => server.config.server_manager !== undefined)) active.push("server_manager")
  if (global.active_health.enabled || servers.some((server) => server.config.active_health?.enabled === true)) active.push("active_health")
  if (global.web !== undefined) active.push("web")
  return active
}

export const makeViews = Effect.gen(function* () {
  const store = yield* ConfigStore
  const registry = yield* PlayerRegistry
  const balancer = yield* Balancer
  const manager = yield* ServerManager
  const stats = yield* Stats
  const lifecycle = yield* Lifecycle

  const serverView = (server: ServerDefinition, counts: ReadonlyMap<string, number>): Effect.Effect<ServerView> =>
    Effect.gen(function* () {
      const status = yield* manager.statusOf(server.id)
      const addresses = yield* balancer.status(server)
      const anyHealthy = addresses.length === 0 || addresses.some((address) => address.healthy)
      const managed = Option.isSome(status)
      const state = Option.match(status, { onNone: () => "online" as const, onSome: (known) => known.state })
      return {
        id: server.id,
        source: server.source._tag === "Container" ? ("container" as const) : ("file" as const),
        file: server.file,
        container: server.source._tag === "Container" ? { name: server.source.name, id: server.source.id } : null,
        domains: server.config.domains,
        state: state === "online" && !anyHealthy ? "unreachable" : state,
        state_reason: Option.match(status, { onNone: () => (anyHealthy ? null : "every address fails its health check"), onSome: (known) => known.reason }),
        managed,
        players: counts.get(server.id) ?? 0,
        max_players: server.config.max_players,
        proxy_mode: server.config.proxy_mode,
        addresses: addresses.map((address) => ({
          address: address.address,
          weight: address.weight,
          active: address.active,
          healthy: address.healthy,
          ejected: address.ejectedUntil !== undefined,
          failures: address.failures
        }))
      }
    })

  const servers = Effect.gen(function* () {
    const snapshot = yield* store.get
    const counts = yield* registry.counts
    return yield* Effect.forEach(snapshot.servers.values(), (server) => serverView(server, counts))
  })

  const server = (id: string) =>
    Effect.gen(function* () {
      const definition = (yield* store.get).servers.get(id)
      if (definition === undefined) return Option.none<ServerView>()
      return Option.some(yield* serverView(definition, yield* registry.counts))
    })

  const statsView = Effect.gen(function* () {
    const snapshot = yield* stats.snapshot
    const sessions = yield* registry.list
    let liveIn = 0
    let liveOut = 0
    for (const session of sessions) {
      liveIn += session.bytesIn
      liveOut += session.bytesOut
    }
    const view: StatsView = {
      at: new Date(snapshot.at).toISOString(),
      uptime_seconds: Math.max(0, Math.floor((snapshot.at - lifecycle.startedAt) / 1000)),
      connections: { total: snapshot.connections.total, active: snapshot.connections.active, rejected: snapshot.connections.rejected },
      logins: { total: snapshot.logins.total, per_second: snapshot.logins.perSecond },
      pings: { total: snapshot.pings.total, per_second: snapshot.pings.perSecond },
      players_online: sessions.length,
      bytes: { in: snapshot.bytes.in + liveIn, out: snapshot.bytes.out + liveOut },
      status_cache: snapshot.statusCache
    }
    return view
  })

  const census = yield* Effect.serviceOption(WorkerCensus)
  const proxyInfo = Effect.gen(function* () {
    const snapshot = yield* store.get
    const now = Date.now()
    const global = snapshot.global
    return {
      version: PORTAL_VERSION,
      started_at: new Date(lifecycle.startedAt).toISOString(),
      uptime_seconds: Math.max(0, Math.floor((now - lifecycle.startedAt) / 1000)),
      bind: formatHostPort(global.bind),
      web_bind: global.web === undefined ? "" : formatHostPort(global.web.bind),
      workers: {
        configured: global.worker_threads === 0 ? availableParallelism() : global.worker_threads,
        // Worker threads relaying now; without a pool the main thread relays alone.
        running: Option.isSome(census) ? (yield* Ref.get(census.value)).length : 1
      },
      players_online: yield* registry.total,
      servers: snapshot.servers.size,
      features: { active: activeFeatures(snapshot), inactive: inactiveFeatures(global, snapshot.servers.values()) }
    }
  })

  /** The configuration as decoded, secrets redacted; a value that cannot be encoded back is left out. */
  const configView = Effect.map(store.get, (snapshot) => ({
    file: snapshot.configFile,
    revision: snapshot.revision,
    global: redact(Option.getOrElse(Option.getRight(encodeGlobal(snapshot.global)), () => ({}))),
    servers: Object.fromEntries(
      [...snapshot.servers].map(([id, server]) => [id, redact(Option.getOrElse(Option.getRight(encodeServer(server.config)), () => ({})))])
    )
  }))

  return { servers, server, statsView, proxyInfo, configView }
})

export type Views = Effect.Effect.Success<typeof makeViews>
