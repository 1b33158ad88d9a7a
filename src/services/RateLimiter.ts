/**
 * RateLimiter: per client IP, logins and status pings in separate sliding windows (`[rate_limit]`), and, always
 * on, a bound on handshakes in progress per IP and in total so that a flood from one address cannot starve others.
 * Memory stays bounded however many addresses arrive: idle entries expire and the tables are capped.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { GlobalConfig } from "../schema/GlobalConfig.js"
import { ConfigStore } from "./ConfigStore.js"

/** Handshakes one address may have in progress at once. */
export const MAX_PENDING_HANDSHAKES_PER_IP = 8
/** Handshakes in progress at once, all addresses together. */
export const MAX_PENDING_HANDSHAKES = 1024
/** Addresses tracked per limit at most; past it the least recently seen are forgotten. */
export const MAX_TRACKED_ADDRESSES = 100_000

interface WindowCounter {
  /** Start of the current fixed window (epoch ms). */
  windowStart: number
  current: number
  previous: number
}

/**
 * A sliding window approximated from two fixed windows (the previous one weighted by how much of it still
 * overlaps): exact enough for abuse control, constant memory per address.
 */
export class SlidingWindowLimiter {
  private readonly counters = new Map<string, WindowCounter>()

  constructor(private readonly maxTracked = MAX_TRACKED_ADDRESSES) {}

  get size(): number {
    return this.counters.size
  }

  /** Counts one event for `key` and says whether it is within `limit` per `windowMs`. */
  hit(key: string, now: number, limit: number, windowMs: number): boolean {
    let counter = this.counters.get(key)
    if (counter === undefined) {
      counter = { windowStart: now - (now % windowMs), current: 0, previous: 0 }
    } else {
      this.counters.delete(key) // re-inserted below: Map order is recency order
    }
    const elapsedWindows = Math.floor((now - counter.windowStart) / windowMs)
    if (elapsedWindows >= 1) {
      counter.previous = elapsedWindows === 1 ? counter.current : 0
      counter.current = 0
      counter.windowStart += elapsedWindows * windowMs
    }
    const overlap = 1 - (now - counter.windowStart) / windowMs
    const estimate = counter.previous * overlap + counter.current
    const allowed = estimate < limit
    if (allowed) counter.current += 1
    this.counters.set(key, counter)
    if (this.counters.size > this.maxTracked) {
      const oldest = this.counters.keys().next().value
      if (oldest !== undefined) this.counters.delete(oldest)
    }
    return allowed
  }

  /** Forgets addresses idle for two windows: they can no longer affect a decision. */
  sweep(now: number, windowMs: number): void {
    for (const [key, counter] of this.counters) {
      if (now - counter.windowStart >= 2 * windowMs) this.counters.delete(key)
    }
  }
}

export class RateLimiter extends Effect.Service<RateLimiter>()("portal/RateLimiter", {
  scoped: Effect.gen(function* () {
    const store = yield* ConfigStore
    const logins = new SlidingWindowLimiter()
    const pings = new SlidingWindowLimiter()
    const pending = new Map<string, number>()
    let pendingTotal = 0

    const sweepOnce = Effect.gen(function* () {
      const { rate_limit } = (yield* store.get).global
      const now = yield* Clock.currentTimeMillis
      logins.sweep(now, Duration.toMillis(rate_limit.window))
      pings.sweep(now, Duration.toMillis(rate_limit.status_window))
    })
    yield* sweepOnce.pipe(Effect.delay(Duration.seconds(10)), Effect.forever, Effect.forkScoped)

    /** Counts an attempt of `kind` by `ip` at `now`; false when over the limit. Synchronous: called per connection. */
    const allowAt = (kind: "login" | "status", ip: string, now: number, global: GlobalConfig): boolean => {
      const { rate_limit } = global
      if (!rate_limit.enabled) return true
      return kind === "login"
        ? logins.hit(ip, now, rate_limit.max_connections, Duration.toMillis(rate_limit.window))
        : pings.hit(ip, now, rate_limit.status_max, Duration.toMillis(rate_limit.status_window))
    }

    const check = (kind: "login" | "status") => (ip: string) =>
      Effect.flatMap(store.get, (snapshot) => Effect.map(Clock.currentTimeMillis, (now) => allowAt(kind, ip, now, snapshot.global)))

    /**
     * Takes a handshake slot for `ip` until `release` is called (idempotent); None when the address or the proxy
     * has too many handshakes in progress.
     */
    const enterHandshakeNow = (ip: string): (() => void) | undefined => {
      const mine = pending.get(ip) ?? 0
      if (mine >= MAX_PENDING_HANDSHAKES_PER_IP || pendingTotal >= MAX_PENDING_HANDSHAKES) return undefined
      pending.set(ip, mine + 1)
      pendingTotal += 1
      let released = false
      return () => {
        if (released) return
        released = true
        pendingTotal -= 1
        const left = (pending.get(ip) ?? 1) - 1
        if (left <= 0) pending.delete(ip)
        else pending.set(ip, left)
      }
    }
    const enterHandshake = (ip: string): Effect.Effect<Option.Option<() => void>> =>
      Effect.sync(() => Option.fromNullable(enterHandshakeNow(ip)))

    return {
      /** Counts a login attempt; false when the address is over `[rate_limit]` for logins. */
      allowLogin: check("login"),
      /** Counts a status ping; false when the address is over `[rate_limit]` for pings. */
      allowStatus: check("status"),
      allowAt,
      enterHandshake,
      /** `enterHandshake`, synchronously: the release, or undefined when over a bound. */
      enterHandshakeNow,
      pendingHandshakes: Effect.sync(() => pendingTotal),
      tracked: Effect.sync(() => ({ logins: logins.size, pings: pings.size, pending: pending.size }))
    }
  })
}) {}
