/**
 * A worker's short memory of the status answers the main thread gave it. The main thread owns the status cache, and
 * each answer it sends says how long it stays the answer the cache would give (`reuseForMs`: what is left of the
 * entry's ttl, a second at most for an answer Portal composes, nothing for a fallback after a failed fetch). Until
 * then the worker answers the same server, domain, state and protocol version itself, without a call: pings then cost the
 * main thread nothing, and scale with the workers. A new configuration snapshot forgets every answer; the state is
 * part of the key. Concurrent pings of one key share one call. Every ping still counts in the status cache
 * statistics as the main thread would have counted it.
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import { statusCacheKey } from "../status/cacheKey.js"
import type { StatusAnswer, StatusRequest, StatusSource } from "../StatusService.js"

/** At most this many answers are remembered (keys are servers × domains × states × protocol versions seen). */
export const STATUS_MEMO_MAX_ENTRIES = 1_000

export interface StatusMemoServices {
  /** The main thread's answer (a call). */
  readonly ask: (request: StatusRequest) => Effect.Effect<StatusAnswer>
  /** The configuration in force: answers given under another one are forgotten. */
  readonly snapshot: () => unknown
  /** A monotonic clock in milliseconds. */
  readonly nowMs: () => number
  readonly count: (outcome: "hit" | "miss" | "stale") => void
}

interface Remembered {
  /** The answer as a reuse serves it: a fetched answer is, from then on, the cache's. */
  readonly served: StatusAnswer
  readonly until: number
}

/** What the main thread counts for a ping answered from `source` (it counts nothing for a composed answer). */
const countAs = (source: StatusSource, count: StatusMemoServices["count"]): void => {
  if (source === "cache") count("hit")
  else if (source === "backend") count("miss")
  else if (source === "stale") {
    count("miss")
    count("stale")
  }
}

export const makeStatusMemo = ({ ask, snapshot, nowMs, count }: StatusMemoServices) => {
  const remembered = new Map<string, Remembered>()
  const inflight = new Map<string, Deferred.Deferred<StatusAnswer>>()
  let under: unknown = snapshot()

  const keyOf = (request: StatusRequest) =>
    `${request.state}\0${request.server === undefined ? `\0\0${request.handshake.protocolVersion}` : statusCacheKey(request.server, request.handshake.address, request.handshake.protocolVersion)}`

  const remember = (key: string, given: StatusAnswer, asked: unknown) => {
    if (given.reuseForMs <= 0 || asked !== under) return
    remembered.delete(key)
    const served = given.source === "backend" ? { ...given, source: "cache" as const } : given
    remembered.set(key, { served, until: nowMs() + given.reuseForMs })
    if (remembered.size > STATUS_MEMO_MAX_ENTRIES) {
      const oldest = remembered.keys().next().value
      if (oldest !== undefined) remembered.delete(oldest)
    }
  }

  const answer = (request: StatusRequest): Effect.Effect<StatusAnswer> =>
    Effect.suspend(() => {
      const current = snapshot()
      if (current !== under) {
        remembered.clear()
        under = current
      }
      const key = keyOf(request)
      const known = remembered.get(key)
      if (known !== undefined) {
        if (nowMs() < known.until) {
          countAs(known.served.source, count)
          return Effect.succeed(known.served)
        }
        remembered.delete(key)
      }
      const pending = inflight.get(key)
      if (pending !== undefined) return Effect.tap(Deferred.await(pending), (shared) => Effect.sync(() => countAs(shared.source, count)))
      // The call runs on its own fiber: a pinging client that leaves must not fail the pings sharing it.
      const created = Deferred.unsafeMake<StatusAnswer>(FiberId.none)
      inflight.set(key, created)
      return ask(request).pipe(
        Effect.tap((given) => Effect.sync(() => remember(key, given, current))),
        Effect.exit,
        Effect.flatMap((exit) =>
          Effect.suspend(() => {
            inflight.delete(key)
            return Deferred.done(created, exit)
          })
        ),
        Effect.forkDaemon,
        Effect.zipRight(Deferred.await(created))
      )
    })

  return { answer, size: () => remembered.size }
}

export type StatusMemo = ReturnType<typeof makeStatusMemo>
