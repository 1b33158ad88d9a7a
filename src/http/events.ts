/**
 * The live events of the admin API (`GET /api/v1/events`): players joining and leaving, server states, backend
 * health, bans made and lifted, configuration reloads, and a `stats` tick every 2 s. Each event gets the next id;
 * the last few hundred are remembered so that a client that reconnects with `Last-Event-ID` misses nothing recent.
 * Sent as server-sent events (`id`, `event`, `data` lines), read by the UI with `fetch` so that the key travels in the
 * Authorization header, never in the URL.
 */
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as PubSub from "effect/PubSub"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { BanStore } from "../services/BanStore.js"
import { ConfigStore, type ConfigSnapshot } from "../services/ConfigStore.js"
import { HealthMonitor } from "../services/HealthMonitor.js"
import { PlayerRegistry } from "../services/PlayerRegistry.js"
import { ServerManager } from "../services/ServerManager.js"
import { banView, playerView, type Views } from "./views.js"

export const EVENT_TYPES = [
  "player.join",
  "player.leave",
  "server.state",
  "backend.health",
  "ban.created",
  "ban.removed",
  "config.reload",
  "stats"
] as const
export type EventType = (typeof EVENT_TYPES)[number]

export interface AdminEvent {
  readonly id: number
  readonly type: EventType
  readonly data: unknown
}

export const STATS_INTERVAL = Duration.seconds(2)
/** Events remembered for `Last-Event-ID`. */
const REMEMBERED = 512
/** A comment line this often keeps idle connections (and proxies in between) open. */
const KEEPALIVE = Duration.seconds(15)

/** One event in the text/event-stream format. */
export const formatEvent = (event: AdminEvent): string => `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event.data)}\n\n`

const serverIds = (snapshot: ConfigSnapshot) => new Set(snapshot.servers.keys())

/** Collects the events of every service from the moment it is built; streams them to each connected client. */
export const makeEventHub = (views: Views) =>
  Effect.gen(function* () {
    const hub = yield* PubSub.sliding<AdminEvent>(4096)
    // Ends every open stream when the web server stops: the HTTP server's close waits for its responses to end.
    const closing = yield* Deferred.make<void>()
    yield* Effect.addFinalizer(() => Effect.zipRight(Deferred.succeed(closing, undefined), PubSub.shutdown(hub)))
    const recent: Array<AdminEvent> = []
    // Ids go on from one run to the next, so that a client resuming across a restart with the last id it saw is not
    // taken to have seen this run's events: they count from the start time in microseconds (below 2^53 until 2255).
    let nextId = (yield* Clock.currentTimeMillis) * 1000
    const emit = (type: EventType, data: unknown) =>
      Effect.suspend(() => {
        const event: AdminEvent = { id: nextId++, type, data }
        recent.push(event)
        if (recent.length > REMEMBERED) recent.shift()
        return PubSub.publish(hub, event)
      })

    const players = yield* (yield* PlayerRegistry).subscribe
    yield* Effect.forkScoped(
      Stream.runForEach(players, (event) => emit(event._tag === "Joined" ? "player.join" : "player.leave", playerView(event.session)))
    )
    const states = yield* (yield* ServerManager).subscribe
    yield* Effect.forkScoped(
      Stream.runForEach(Stream.fromQueue(states), (change) =>
        emit("server.state", { server: change.serverId, from: change.from, to: change.to, reason: change.reason ?? null, at: new Date(change.at).toISOString() })
      )
    )
    const health = yield* (yield* HealthMonitor).subscribe
    yield* Effect.forkScoped(
      Stream.runForEach(health, (change) =>
        emit("backend.health", { server: change.serverId, address: change.address, healthy: change.healthy, reason: change.reason ?? null })
      )
    )
    const bans = yield* (yield* BanStore).subscribe
    yield* Effect.forkScoped(
      Stream.runForEach(bans, (change) =>
        Effect.zipRight(
          Effect.forEach(change.added, (ban) => emit("ban.created", banView(ban)), { discard: true }),
          Effect.forEach(change.removed, (ban) => emit("ban.removed", banView(ban)), { discard: true })
        )
      )
    )
    const store = yield* ConfigStore
    let known = serverIds(yield* store.get)
    yield* Effect.forkScoped(
      Stream.runForEach(Stream.drop(store.changes, 1), (snapshot) => {
        const ids = serverIds(snapshot)
        const added = [...ids].filter((id) => !known.has(id))
        const removed = [...known].filter((id) => !ids.has(id))
        known = ids
        return emit("config.reload", { revision: snapshot.revision, servers: [...ids], added, removed })
      })
    )
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.flatMap(views.statsView, (stats) => emit("stats", stats)),
        Schedule.spaced(STATS_INTERVAL)
      )
    )

    /**
     * The events after `lastId` still remembered, then every new one, as text, with a keep-alive comment when quiet.
     * It subscribes when it starts and says so with a `: connected` comment first: nothing after that is missed.
     */
    const stream = (lastId: number | undefined): Stream.Stream<string> =>
      Stream.unwrapScoped(
        Effect.map(PubSub.subscribe(hub), (queue) => {
          // An id this run has not reached (the clock went back, or a made-up one) is from no known past: all.
          const after = lastId === undefined ? undefined : lastId >= nextId ? 0 : lastId
          const replay = after === undefined ? [] : recent.filter((event) => event.id > after)
          const replayedUpTo = replay.length > 0 ? replay[replay.length - 1]!.id : (after ?? 0)
          const live = Stream.fromQueue(queue).pipe(Stream.filter((event) => event.id > replayedUpTo))
          const events = Stream.concat(Stream.fromChunk(Chunk.fromIterable(replay)), live).pipe(Stream.map(formatEvent))
          const keepalive = Stream.fromSchedule(Schedule.spaced(KEEPALIVE)).pipe(Stream.as(": keep-alive\n\n"))
          return Stream.concat(Stream.make(": connected\n\n"), Stream.merge(events, keepalive, { haltStrategy: "left" })).pipe(
            Stream.interruptWhen(Deferred.await(closing))
          )
        })
      )

    return { stream, emit }
  })

export type EventHub = Effect.Effect.Success<ReturnType<typeof makeEventHub>>
