/**
 * The reference model of an exact per-address sliding window, as Portal kept it in one thread before the shared
 * table: the shared IpTable must make the same decisions (test/services/shared/IpTable.test.ts checks it).
 */
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

