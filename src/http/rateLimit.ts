/**
 * `[web.rate_limit] requests_per_minute`: a fixed one-minute window per client address, opened by its first request.
 * Every request to the API counts, failed authentications included, so guessing keys is as slow as the limit.
 */

/** What the limiter says about one request, and what the `X-RateLimit-*` headers report. */
export interface RateDecision {
  readonly allowed: boolean
  readonly limit: number
  readonly remaining: number
  /** Seconds until the window ends and the count starts again (at least 1). */
  readonly resetSeconds: number
}

const WINDOW_MS = 60_000
/** Past this many addresses, windows that have ended are forgotten before a new one is added. */
const PRUNE_ABOVE = 10_000

export const makeRateLimiter = (limit: number) => {
  const windows = new Map<string, { start: number; count: number }>()
  const prune = (now: number) => {
    for (const [address, window] of windows) if (now - window.start >= WINDOW_MS) windows.delete(address)
  }
  return (address: string, now: number): RateDecision => {
    let window = windows.get(address)
    if (window === undefined || now - window.start >= WINDOW_MS) {
      if (window === undefined && windows.size >= PRUNE_ABOVE) prune(now)
      window = { start: now, count: 0 }
      windows.set(address, window)
    }
    const allowed = window.count < limit
    if (allowed) window.count += 1
    return {
      allowed,
      limit,
      remaining: Math.max(0, limit - window.count),
      resetSeconds: Math.max(1, Math.ceil((window.start + WINDOW_MS - now) / 1000))
    }
  }
}

export type RateLimiter = ReturnType<typeof makeRateLimiter>
