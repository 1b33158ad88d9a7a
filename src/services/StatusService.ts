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
import type { ServerDefinition } from "../schema/decode.js"
import type { MotdEntry, ServerState } from "../schema/common.js"
import { readFrame } from "../protocol/frame.js"
import { decodeWith } from "../protocol/ProtocolError.js"
import type { Handshake } from "../protocol/handshake.js"
import { NEXT_STATE_STATUS } from "../protocol/handshake.js"
import {
  decodeStatusResponseBody,
  MAX_STATUS_FRAME_BYTES,
  STATUS_REQUEST,
  type StatusJson
} from "../protocol/status.js"
import { Backend } from "./Backend.js"
import { ConfigStore } from "./ConfigStore.js"
import { Forwarding } from "./Forwarding.js"
import { PlayerRegistry } from "./PlayerRegistry.js"
import { done, failParse, failWith, needMore, SocketReader, writeAll } from "./net/SocketReader.js"
import { BUILT_IN_TEXT, composeStatus, motdEntryFor, overlayOnline, parseBackendStatus, UNKNOWN_DOMAIN_TEXT } from "./status/motd.js"
import { StatusCache } from "./status/StatusCache.js"

/** How long the backend may take to answer once connected (each connect attempt has its own timeout). */
export const STATUS_READ_TIMEOUT_MS = 3_000

export type StatusSource = "cache" | "backend" | "stale" | "composed"

export interface StatusAnswer {
  readonly json: StatusJson
  /** `json` as sent on the wire. */
  readonly text: string
  readonly source: StatusSource
  /** The state shown (an online server whose backends fail is shown `unreachable`). */
  readonly state: ServerState
}

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
    const cache = new StatusCache<StatusJson>()
    const inflight = new Map<string, Deferred.Deferred<StatusJson, Error>>()
    const rendered = new WeakMap<StatusJson, { readonly entry: MotdEntry | undefined; readonly json: StatusJson; readonly text: string }>()

    /** One status request to a backend: connect, handshake, request, read the answer, close. */
    const fetchFromBackend = (request: StatusRequest, server: ServerDefinition) =>
      Effect.scoped(
        Effect.gen(function* () {
          const snapshot = yield* store.get
          const connection = yield* backend.connect(server, snapshot.global)
          const handshake = yield* forwarding.backendHandshake({
            server,
            global: snapshot.global,
            handshake: { ...request.handshake, nextState: NEXT_STATE_STATUS },
            backend: connection.address,
            clientIp: request.clientIp,
            login: undefined
          })
          const parts = request.preamble === undefined ? [handshake, STATUS_REQUEST] : [request.preamble, handshake, STATUS_REQUEST]
          yield* writeAll(connection.socket, Buffer.concat(parts))
          const reader = new SocketReader(connection.socket)
          const text = yield* reader.read("the backend's status answer", MAX_STATUS_FRAME_BYTES, STATUS_READ_TIMEOUT_MS, (buffer) => {
              const frame = readFrame(buffer, 0, MAX_STATUS_FRAME_BYTES)
              if (frame._tag === "Incomplete") return needMore
              if (frame._tag === "Invalid") return failWith(frame.reason)
              if (frame.packetId !== 0x00) return failWith(`unexpected packet ${frame.packetId} instead of a status answer`)
              const decoded = decodeWith(() => decodeStatusResponseBody(buffer.subarray(frame.bodyStart, frame.end)))
              return decoded._tag === "Ok" ? done(decoded.value, frame.end) : failParse(decoded.error)
            })
          return parseBackendStatus(text)
        })
      )

    /** Cache, then a single shared backend request per key. */
    const liveStatus = (request: StatusRequest, server: ServerDefinition) =>
      Effect.gen(function* () {
        const snapshot = yield* store.get
        const ttlMs = Duration.toMillis(snapshot.global.status_cache.ttl)
        const maxEntries = snapshot.global.status_cache.max_entries
        const key = `${server.id}\0${request.handshake.protocolVersion}`
        const now = yield* Clock.currentTimeMillis
        const fresh = cache.fresh(key, now, ttlMs)
        if (fresh !== undefined) return { json: fresh, source: "cache" as const }
        let pending = inflight.get(key)
        if (pending === undefined) {
          const created = yield* Deferred.make<StatusJson, Error>()
          pending = created
          inflight.set(key, created)
          // The request runs on its own fiber: a pinging client that leaves must not fail the others waiting.
          yield* fetchFromBackend(request, server).pipe(
            Effect.mapError((error) => (error instanceof Error ? error : new Error(String(error)))),
            Effect.tap((json) => Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => cache.set(key, json, at, maxEntries)))),
            Effect.exit,
            Effect.flatMap((exit) => Deferred.done(created, exit)),
            Effect.ensuring(Effect.sync(() => inflight.delete(key))),
            Effect.forkDaemon
          )
        }
        const result = yield* Effect.either(Deferred.await(pending))
        if (Either.isRight(result)) return { json: result.right, source: "backend" as const }
        const stale = cache.any(key)
        yield* Effect.logDebug(`status of ${server.id} failed: ${result.left.message}${stale ? "; serving a stale answer" : ""}`)
        if (stale !== undefined) return { json: stale, source: "stale" as const }
        return undefined
      })

    const composed = (request: StatusRequest, state: ServerState) =>
      Effect.gen(function* () {
        const snapshot = yield* store.get
        const server = request.server
        const entry = motdEntryFor(state, server?.config.motd, snapshot.global.default_motd)
        const online = server === undefined ? 0 : registry.dataPlane.countFor(server.id)
        const json = composeStatus({
          entry,
          fallbackText: server === undefined ? UNKNOWN_DOMAIN_TEXT : BUILT_IN_TEXT[state],
          protocolVersion: request.handshake.protocolVersion,
          online,
          max: server?.config.max_players ?? 0
        })
        return { json, text: JSON.stringify(json), source: "composed" as const, state }
      })

    const answer = (request: StatusRequest): Effect.Effect<StatusAnswer> =>
      Effect.gen(function* () {
        const server = request.server
        if (server === undefined) return yield* composed(request, "online")
        if (request.state !== "online") return yield* composed(request, request.state)
        const live = yield* liveStatus(request, server)
        if (live === undefined) return yield* composed(request, "unreachable")
        // Only the server's own [motd.online] overrides a live answer; [default_motd] is for composed answers.
        // A cached answer is rendered once per MOTD entry, not once per ping (favicons make it large).
        const entry = server.config.motd.online
        let memo = rendered.get(live.json)
        if (memo === undefined || memo.entry !== entry) {
          const json = overlayOnline(live.json, entry)
          memo = { entry, json, text: JSON.stringify(json) }
          rendered.set(live.json, memo)
        }
        return { json: memo.json, text: memo.text, source: live.source, state: "online" as const }
      })

    return { answer, cacheKeys: Effect.sync(() => cache.keys()) }
  })
}) {}
