/**
 * StatusService: answers server-list pings. For an online server: the cache (per server and client protocol,
 * `[status_cache]`), else one status request relayed to a backend through the Balancer (concurrent misses share it),
 * with `[motd.online]` laid over; a failed backend falls back to a stale entry, else the `unreachable` MOTD.
 * Other states, and unknown domains, get an answer Portal composes.
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import type { ServerDefinition } from "../schema/decode.js"
import type { MotdEntry, ServerState } from "../schema/common.js"
import type { Handshake } from "../protocol/handshake.js"
import { NEXT_STATE_STATUS } from "../protocol/handshake.js"
import type { StatusJson } from "../protocol/status.js"
import { Backend, type BackendUnavailable } from "./Backend.js"
import { ConfigStore } from "./ConfigStore.js"
import { Forwarding, type ForwardingUnavailable } from "./Forwarding.js"
import { PlayerRegistry } from "./PlayerRegistry.js"
import { Stats } from "./Stats.js"
import { currentConnectionLog } from "./log/connectionFields.js"
import { fetchBackendStatus, type StatusFetchError } from "./status/backendStatus.js"
import { statusCacheKey } from "./status/cacheKey.js"
import { BUILT_IN_TEXT, composeStatus, motdEntryFor, overlayOnline, UNKNOWN_DOMAIN_TEXT } from "./status/motd.js"
import { StatusCache } from "./status/StatusCache.js"

/** How long the backend may take to answer once connected (each connect attempt has its own timeout). */
export const STATUS_READ_TIMEOUT_MS = 3_000

export type StatusSource = "cache" | "backend" | "stale" | "composed"

/** Why a live answer could not be had: no address answered, or the one reached did not give a status answer. */
export type FetchFailure = BackendUnavailable | ForwardingUnavailable | StatusFetchError

export interface StatusAnswer {
  readonly json: StatusJson
  /** `json` as sent on the wire. */
  readonly text: string
  readonly source: StatusSource
  /** The state shown (an online server whose backends fail is shown `unreachable`). */
  readonly state: ServerState
  /**
   * How long, from now, this answer stays the one the service would give to the same server, state and protocol
   * version while the configuration is unchanged: what is left of the cache entry's ttl for a cached or just fetched
   * answer, a second at most (and never past the ttl) for one Portal composes, 0 for a fallback after a failed fetch
   * (the next ping tries the backend again). Workers reuse answers for that long (workers/statusMemo.ts).
   */
  readonly reuseForMs: number
}

/**
 * How long past its ttl a backend's answer still stands in for a failed fetch: long enough to hide a backend's
 * passing hiccup, short enough that a server that went down is soon shown `unreachable`.
 */
export const STALE_GRACE_MS = 30_000

/** How long a composed answer (a state's MOTD, player counts included) may be reused, at most. */
export const COMPOSED_REUSE_MS = 1_000

export interface StatusRequest {
  /** Undefined for a domain no server claims. */
  readonly server: ServerDefinition | undefined
  /** The lifecycle state of the server (`online` for servers without a manager). */
  readonly state: ServerState
  readonly handshake: Handshake
  readonly clientIp: string
  /** Bytes that open every backend connection (a PROXY header), if the server wants them. */
  readonly preamble: Buffer | undefined
}

export class StatusService extends Effect.Service<StatusService>()("portal/StatusService", {
  effect: Effect.gen(function* () {
    const store = yield* ConfigStore
    const backend = yield* Backend
    const forwarding = yield* Forwarding
    const registry = yield* PlayerRegistry
    const stats = (yield* Stats).dataPlane
    const cache = new StatusCache<StatusJson>()
    const inflight = new Map<string, Deferred.Deferred<StatusJson, FetchFailure>>()
    const rendered = new WeakMap<StatusJson, { readonly entry: MotdEntry | undefined; readonly json: StatusJson; readonly text: string }>()

    /** One status request to a backend chosen by the Balancer, through Backend (timeouts, attempts, PROXY header). */
    const fetchFromBackend = (request: StatusRequest, server: ServerDefinition) =>
      Effect.flatMap(store.get, (snapshot) =>
        fetchBackendStatus({
          connect: backend.connect(server, snapshot.global),
          opening: (address) =>
            Effect.map(
              forwarding.backendHandshake({
                server,
                global: snapshot.global,
                handshake: { ...request.handshake, nextState: NEXT_STATE_STATUS },
                backend: address,
                clientIp: request.clientIp,
                login: undefined
              }),
              (handshake) => (request.preamble === undefined ? [handshake] : [request.preamble, handshake])
            ),
          readTimeoutMs: STATUS_READ_TIMEOUT_MS
        })
      )

    /**
     * The one log line of a failed fetch, written by the fetch itself (not by each ping waiting on it). A backend that
     * was reached and answered wrongly, or not at all, is worth a warning; one that cannot be reached is already
     * shown `unreachable`, and the login path and the Balancer report it.
     */
    const logFailure = (server: ServerDefinition, error: FetchFailure, staleKept: boolean) => {
      const outcome = staleKept ? "serving the last good answer" : "showing the unreachable MOTD"
      return error._tag === "StatusFetchError"
        ? Effect.logWarning(`status of ${server.id} from ${error.address} failed: ${error.message}; ${outcome}`)
        : Effect.logDebug(`status of ${server.id} failed: ${error.message}; ${outcome}`)
    }

    /** The fetch runs on the server's behalf: its lines carry the server, not the fields of the ping that started it. */
    const asServer = (serverId: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.locally(
        Effect.locally(effect, FiberRef.currentLogAnnotations, HashMap.make(["server", serverId] as const)),
        currentConnectionLog,
        undefined
      )

    /** Cache, then a single shared backend request per key. */
    const liveStatus = (request: StatusRequest, server: ServerDefinition) =>
      Effect.gen(function* () {
        const snapshot = yield* store.get
        const ttlMs = Duration.toMillis(snapshot.global.status_cache.ttl)
        const maxEntries = snapshot.global.status_cache.max_entries
        const key = statusCacheKey(server, request.handshake.address, request.handshake.protocolVersion)
        const now = yield* Clock.currentTimeMillis
        const fresh = cache.fresh(key, now, ttlMs)
        if (fresh !== undefined) {
          stats.statusCache("hit")
          return { json: fresh.value, source: "cache" as const, reuseForMs: ttlMs - (now - fresh.storedAt) }
        }
        stats.statusCache("miss")
        let pending = inflight.get(key)
        if (pending === undefined) {
          const created = yield* Deferred.make<StatusJson, FetchFailure>()
          pending = created
          inflight.set(key, created)
          // The request runs on its own fiber: a pinging client that leaves must not fail the others waiting.
          yield* fetchFromBackend(request, server).pipe(
            Effect.map((fetched) => fetched.json),
            Effect.tap((json) => Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => cache.set(key, json, at, maxEntries)))),
            Effect.tapError((error) =>
              Effect.flatMap(Clock.currentTimeMillis, (at) => logFailure(server, error, cache.stale(key, at, ttlMs + STALE_GRACE_MS) !== undefined))
            ),
            Effect.exit,
            Effect.flatMap((exit) => Deferred.done(created, exit)),
            Effect.ensuring(Effect.sync(() => inflight.delete(key))),
            asServer(server.id),
            Effect.forkDaemon
          )
        }
        const result = yield* Effect.either(Deferred.await(pending))
        if (Either.isRight(result)) {
          // Reusable for as long as the entry the fetch stored stays fresh (not at all with max_entries = 0).
          const after = yield* Clock.currentTimeMillis
          const stored = cache.fresh(key, after, ttlMs)
          const reuseForMs = stored === undefined || stored.value !== result.right ? 0 : ttlMs - (after - stored.storedAt)
          return { json: result.right, source: "backend" as const, reuseForMs: Math.max(0, reuseForMs) }
        }
        const stale = cache.stale(key, yield* Clock.currentTimeMillis, ttlMs + STALE_GRACE_MS)
        if (stale !== undefined) {
          stats.statusCache("stale")
          return { json: stale, source: "stale" as const, reuseForMs: 0 }
        }
        return undefined
      })

    /** `reuse`: whether the answer may be reused for a while (not when it stands in for a failed fetch). */
    const composed = (request: StatusRequest, state: ServerState, reuse: boolean) =>
      Effect.gen(function* () {
        const snapshot = yield* store.get
        const server = request.server
        const entry = motdEntryFor(state, server?.config.motd, snapshot.global.default_motd)
        const online = server === undefined ? 0 : registry.dataPlane.countFor(server)
        const json = composeStatus({
          entry,
          fallbackText: server === undefined ? UNKNOWN_DOMAIN_TEXT : BUILT_IN_TEXT[state],
          protocolVersion: request.handshake.protocolVersion,
          online,
          max: server?.config.max_players ?? 0
        })
        const reuseForMs = reuse ? Math.min(COMPOSED_REUSE_MS, Duration.toMillis(snapshot.global.status_cache.ttl)) : 0
        return { json, text: JSON.stringify(json), source: "composed" as const, state, reuseForMs }
      })

    const answer = (request: StatusRequest): Effect.Effect<StatusAnswer> =>
      Effect.gen(function* () {
        const server = request.server
        if (server === undefined) return yield* composed(request, "online", true)
        if (request.state !== "online") return yield* composed(request, request.state, true)
        const live = yield* liveStatus(request, server)
        if (live === undefined) return yield* composed(request, "unreachable", false)
        // Only the server's own [motd.online] overrides a live answer; [default_motd] is for composed answers.
        // A cached answer is rendered once per MOTD entry, not once per ping (favicons make it large).
        const entry = server.config.motd.online
        let memo = rendered.get(live.json)
        if (memo === undefined || memo.entry !== entry) {
          const json = overlayOnline(live.json, entry)
          memo = { entry, json, text: JSON.stringify(json) }
          rendered.set(live.json, memo)
        }
        return { json: memo.json, text: memo.text, source: live.source, state: "online" as const, reuseForMs: live.reuseForMs }
      })

    return { answer, cacheKeys: Effect.sync(() => cache.keys()) }
  })
}) {}
