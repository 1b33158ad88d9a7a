/**
 * The status cache: least recently used entries go first past `maxEntries`; an entry is fresh for `ttl` and
 * serves a while longer as a stale fallback for when the backend fails. Time is passed in, so tests control it.
 */

export interface CachedStatus<A> {
  readonly value: A
  readonly storedAt: number
}

export class StatusCache<A> {
  private readonly entries = new Map<string, CachedStatus<A>>()

  get size(): number {
    return this.entries.size
  }

  /**
   * The entry (its value and when it was stored) if it is younger than `ttlMs`; refreshes its recency. One stored
   * "in the future" (the wall clock was stepped back since) is not fresh: otherwise it would be served for as long as
   * the step.
   */
  fresh(key: string, now: number, ttlMs: number): CachedStatus<A> | undefined {
    const entry = this.touch(key)
    if (entry === undefined) return undefined
    const age = now - entry.storedAt
    return age >= 0 && age < ttlMs ? entry : undefined
  }

  /**
   * The stale fallback: the entry if it was stored less than `maxAgeMs` ago (or as long "in the future", the clock
   * stepped back since). Older, a server that stopped answering is shown as it is, not as it was.
   */
  stale(key: string, now: number, maxAgeMs: number): A | undefined {
    const entry = this.touch(key)
    if (entry === undefined) return undefined
    return Math.abs(now - entry.storedAt) < maxAgeMs ? entry.value : undefined
  }

  set(key: string, value: A, now: number, maxEntries: number): void {
    if (maxEntries <= 0) return
    this.entries.delete(key)
    this.entries.set(key, { value, storedAt: now })
    while (this.entries.size > maxEntries) {
      const oldest = this.entries.keys().next().value
      if (oldest === undefined) break
      this.entries.delete(oldest)
    }
  }

  keys(): Array<string> {
    return [...this.entries.keys()]
  }

  private touch(key: string): CachedStatus<A> | undefined {
    const entry = this.entries.get(key)
    if (entry !== undefined) {
      this.entries.delete(key)
      this.entries.set(key, entry)
    }
    return entry
  }
}
