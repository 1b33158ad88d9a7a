/**
 * RateLimiter: per client IP, logins and status pings in separate sliding windows (`[rate_limit]`), and, always
 * on, a bound on handshakes in progress per IP and in total so that a flood from one address cannot starve others.
 * Memory stays bounded however many addresses arrive: idle entries expire and the tables are capped.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { GlobalConfig } from "../schema/GlobalConfig.js"
import { ConfigStore } from "./ConfigStore.js"
import { releaseOnce } from "./once.js"

/** Handshakes one address may have in progress at once. */
export const MAX_PENDING_HANDSHAKES_PER_IP = 8
/** Handshakes in progress at once, all addresses together. */
export const MAX_PENDING_HANDSHAKES = 1024
/** Addresses tracked per limit at most; past it the least recently seen are forgotten. */
export const MAX_TRACKED_ADDRESSES = 100_000

/** Allowed events remembered at most, all addresses together: about 30 MB at worst, with 100,000 addresses. */
export const MAX_STORED_EVENTS = 1_000_000

/**
 * An exact sliding window: for each address, the times of its allowed events still inside the window (at most
 * `limit` of them). An event is allowed when fewer than `limit` allowed events happened in the `windowMs` before
 * it, wherever the window falls: no fixed boundary lets a burst through. Refused events are not remembered, so
 * hammering does not extend a wait. Memory is bounded by the number of addresses and by the events stored.
 */
export class SlidingWindowLimiter {
  /** Times per address, oldest first; Map order is recency order, for eviction. */
  private readonly times = new Map<string, Array<number>>()
  private stored = 0

  constructor(
    private readonly maxTracked = MAX_TRACKED_ADDRESSES,
    private readonly maxStored = MAX_STORED_EVENTS
  ) {}

  get size(): number {
    return this.times.size
  }

  /** Events remembered, all addresses together. */
  get storedEvents(): number {
    return this.stored
  }

  /** Counts one event for `key` at `now` and says whether it is within `limit` per `windowMs`. */
  hit(key: string, now: number, limit: number, windowMs: number): boolean {
    const times = this.times.get(key) ?? []
    this.times.delete(key) // re-inserted below, as the most recent
    this.stored -= this.expire(times, now, windowMs)
    const allowed = times.length < limit
    if (allowed) {
      times.push(now)
      this.stored += 1
    }
    if (times.length > 0) this.times.set(key, times)
    this.evict(key)
    return allowed
  }

  /** Forgets addresses with no event left inside the window: they can no longer affect a decision. */
  sweep(now: number, windowMs: number): void {
    for (const [key, times] of this.times) {
      this.stored -= this.expire(times, now, windowMs)
      if (times.length === 0) this.times.delete(key)
    }
  }

  /** Drops the times at least `windowMs` old from the front; returns how many. */
  private expire(times: Array<number>, now: number, windowMs: number): number {
    // A wall clock stepped back leaves times ahead of now: they count as now, so nobody waits out the step.
    for (let i = times.length - 1; i >= 0 && times[i]! > now; i--) times[i] = now
    let old = 0
    while (old < times.length && now - times[old]! >= windowMs) old += 1
    if (old > 0) times.splice(0, old)
    return old
  }

  /** Forgets the least recently seen addresses past either bound, never `current`. */
  private evict(current: string): void {
    for (const [key, times] of this.times) {
      if (this.times.size <= this.maxTracked && this.stored <= this.maxStored) return
      if (key === current) return // the only one left is the address being counted
      this.times.delete(key)
      this.stored -= times.length
    }
  }
}

/** The connection path's surface: synchronous, called for every connection. */
export interface RateLimiterDataPlane {
  /** Counts an attempt of `kind` by `ip` at `now` (epoch ms); false when the address is over `[rate_limit]`. */
  readonly allow: (kind: "login" | "status", ip: string, nowMs: number, global: GlobalConfig) => boolean
  /**
   * Takes a handshake slot for `ip` until the returned release is called (idempotent); undefined when the address or
   * the proxy has too many handshakes in progress.
   */
  readonly enterHandshake: (ip: string) => (() => void) | undefined
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

    /**
     * Takes a handshake slot for `ip` until `release` is called (idempotent); None when the address or the proxy
     * has too many handshakes in progress.
     */
    const enterHandshakeNow = (ip: string): (() => void) | undefined => {
      const mine = pending.get(ip) ?? 0
      if (mine >= MAX_PENDING_HANDSHAKES_PER_IP || pendingTotal >= MAX_PENDING_HANDSHAKES) return undefined
      pending.set(ip, mine + 1)
      pendingTotal += 1
      return releaseOnce(() => {
        pendingTotal -= 1
        const left = (pending.get(ip) ?? 1) - 1
        if (left <= 0) pending.delete(ip)
        else pending.set(ip, left)
      })
    }
    const dataPlane: RateLimiterDataPlane = { allow: allowAt, enterHandshake: enterHandshakeNow }
    return {
      dataPlane,
      pendingHandshakes: Effect.sync(() => pendingTotal),
      tracked: Effect.sync(() => ({ logins: logins.size, pings: pings.size, pending: pending.size }))
    }
  })
}) {}
