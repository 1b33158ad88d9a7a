/** The admin API's rate limit: a fixed one-minute window per address. */
import { describe, expect, it } from "vitest"
import { makeRateLimiter } from "../../src/http/rateLimit.js"

describe("admin API rate limit", () => {
  it("allows the limit per minute per address, then refuses until the window ends", () => {
    const limit = makeRateLimiter(2)
    expect(limit("a", 0)).toEqual({ allowed: true, limit: 2, remaining: 1, resetSeconds: 60 })
    expect(limit("a", 1_000)).toEqual({ allowed: true, limit: 2, remaining: 0, resetSeconds: 59 })
    expect(limit("a", 30_500)).toEqual({ allowed: false, limit: 2, remaining: 0, resetSeconds: 30 })
    expect(limit("b", 30_500).allowed).toBe(true)
    expect(limit("a", 60_000)).toEqual({ allowed: true, limit: 2, remaining: 1, resetSeconds: 60 })
  })

  it("forgets ended windows once many addresses are known", () => {
    const limit = makeRateLimiter(1)
    for (let i = 0; i < 10_000; i++) limit(`10.0.${i >> 8}.${i & 255}`, 0)
    expect(limit("10.0.0.0", 1).allowed).toBe(false)
    // A minute on, a new address makes room; the old ones start afresh.
    expect(limit("192.0.2.1", 61_000).allowed).toBe(true)
    expect(limit("10.0.0.0", 61_000).allowed).toBe(true)
  })
})
