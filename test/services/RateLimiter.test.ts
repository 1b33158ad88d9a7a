/** Rate limits with TestClock, the handshake gate, bounded memory, and the IP filter rule. */
import { it } from "@effect/vitest"
import { Clock, Duration, Effect, Layer, TestClock } from "effect"
import { describe, expect } from "vitest"
import { Schema } from "effect"
import { GlobalConfig } from "../../src/schema/GlobalConfig.js"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { compileFilter, isAllowed } from "../../src/services/IpFilter.js"
import { MAX_PENDING_HANDSHAKES, MAX_PENDING_HANDSHAKES_PER_IP, RateLimiter, rateLimiterDataPlane } from "../../src/services/RateLimiter.js"
import { attachSharedState, createSharedState } from "../../src/services/shared/SharedState.js"
import { DEFAULT_HANDSHAKES_PER_WORKER } from "../../src/services/shared/layout.js"
import { SharedMemory } from "../../src/services/SharedMemory.js"
import { SlidingWindowLimiter } from "./shared/slidingWindowModel.js"

const layerWith = (rateLimit: Record<string, unknown>) =>
  RateLimiter.Default.pipe(
    Layer.provide(SharedMemory.layer(1)),
    Layer.provideMerge(
      ConfigStore.layerStatic({
        configFile: "proxy.toml",
        global: Schema.decodeUnknownSync(GlobalConfig)({ rate_limit: rateLimit }),
        servers: new Map(),
        revision: 1
      })
    )
  )

/** One attempt through the data plane, at the (test) clock's time and with the configuration in force. */
const attempt = (limiter: RateLimiter, kind: "login" | "status", ip: string) =>
  Effect.gen(function* () {
    const { global } = yield* (yield* ConfigStore).get
    const now = yield* Clock.currentTimeMillis
    return limiter.dataPlane.allow(kind, ip, now, global)
  })

/** A flood memory that does nothing, so that filling the bound here leaves the test thread's heap alone. */
const noFloodMemory = { flooded: () => {}, saving: () => false }

describe("RateLimiter", () => {
  it.scoped("is off unless enabled", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      for (let i = 0; i < 50; i++) expect(yield* attempt(limiter, "login", "10.0.0.1")).toBe(true)
    }).pipe(Effect.provide(layerWith({ enabled: false, max_connections: 1 })))
  )

  it.scoped("allows max_connections logins per window per IP, separately from pings", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      const logins = yield* Effect.forEach([1, 2, 3, 4], () => attempt(limiter, "login", "10.0.0.1"))
      expect(logins).toEqual([true, true, true, false])
      // Another address has its own budget, and pings their own.
      expect(yield* attempt(limiter, "login", "10.0.0.2")).toBe(true)
      expect(yield* attempt(limiter, "status", "10.0.0.1")).toBe(true)
      // Two windows later the address is fully trusted again.
      yield* TestClock.adjust(Duration.seconds(20))
      expect(yield* Effect.forEach([1, 2, 3], () => attempt(limiter, "login", "10.0.0.1"))).toEqual([true, true, true])
    }).pipe(Effect.provide(layerWith({ enabled: true, max_connections: 3, window: "10s" })))
  )

  it.scoped("status pings: status_max per status_window", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      const results = yield* Effect.forEach(Array.from({ length: 6 }), () => attempt(limiter, "status", "2001:db8::1"))
      expect(results).toEqual([true, true, true, true, true, false])
    }).pipe(Effect.provide(layerWith({ enabled: true, status_max: 5, status_window: "1m" })))
  )

  it.scoped("bounds handshakes in progress per IP, and releases them once", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      const slots = Array.from({ length: MAX_PENDING_HANDSHAKES_PER_IP + 1 }, () => limiter.dataPlane.enterHandshake("10.0.0.9", { evicted: () => {} }))
      expect(slots.filter((slot) => slot !== undefined)).toHaveLength(MAX_PENDING_HANDSHAKES_PER_IP)
      expect(limiter.dataPlane.enterHandshake("10.0.0.10", { evicted: () => {} })).toBeDefined()
      slots[0]!.release()
      slots[0]!.release() // idempotent
      expect(limiter.dataPlane.enterHandshake("10.0.0.9", { evicted: () => {} })).toBeDefined()
      expect(yield* limiter.pendingHandshakes).toBe(MAX_PENDING_HANDSHAKES_PER_IP + 1)
    }).pipe(Effect.provide(layerWith({})))
  )

  it("a thread's ledger holds the proxy-wide bound: one thread alone can take every place", () => {
    expect(DEFAULT_HANDSHAKES_PER_WORKER).toBeGreaterThanOrEqual(MAX_PENDING_HANDSHAKES)
  })

  it.scoped("with every place taken, the connection that has waited longest for its client gives way: its place is given back and it is closed", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      const evicted: Array<number> = []
      // Every place taken, by addresses that each stay within their own bound, all waiting for their clients.
      const places = Array.from({ length: MAX_PENDING_HANDSHAKES }, (_, i) =>
        limiter.dataPlane.enterHandshake(`10.1.${i >> 3}.1`, { evicted: () => evicted.push(i) })
      )
      expect(places.every((place) => place !== undefined)).toBe(true)
      places.forEach((place) => place!.waiting(true))
      // The first has ended meanwhile: it never gives way. The second is being answered (its bytes arrived): it does
      // not either. The third waited again later, so it is now the newest waiting. The fourth is the longest waiting.
      places[0]!.release()
      places[1]!.waiting(false)
      places[2]!.waiting(false)
      places[2]!.waiting(true)
      expect(limiter.dataPlane.enterHandshake("192.0.2.1", { evicted: () => evicted.push(-1) })).toBeDefined()
      expect(limiter.dataPlane.enterHandshake("192.0.2.2", { evicted: () => evicted.push(-2) })).toBeDefined()
      expect(evicted).toEqual([3])
      expect(yield* limiter.pendingHandshakes).toBe(MAX_PENDING_HANDSHAKES)
      // An evicted connection's own release, when it then closes, gives nothing back twice; waiting again is a no-op.
      places[3]!.waiting(true)
      places[3]!.release()
      expect(yield* limiter.pendingHandshakes).toBe(MAX_PENDING_HANDSHAKES)
      // An address at its own bound is refused, and evicts nobody.
      expect(limiter.dataPlane.enterHandshake("10.1.10.1", { evicted: () => {} })).toBeUndefined()
      expect(evicted).toEqual([3])
    }).pipe(Effect.provide(layerWith({})))
  )

  it.scoped("with every place taken and no connection waiting for its client, a newcomer is refused and nobody is closed", () =>
    Effect.gen(function* () {
      const limiter = yield* RateLimiter
      const evicted: Array<number> = []
      const places = Array.from({ length: MAX_PENDING_HANDSHAKES }, (_, i) =>
        limiter.dataPlane.enterHandshake(`10.2.${i >> 3}.1`, { evicted: () => evicted.push(i) })
      )
      expect(places.every((place) => place !== undefined)).toBe(true)
      expect(limiter.dataPlane.enterHandshake("192.0.2.3", { evicted: () => {} })).toBeUndefined()
      // One starts waiting: the next newcomer takes its place.
      places[7]!.waiting(true)
      expect(limiter.dataPlane.enterHandshake("192.0.2.4", { evicted: () => {} })).toBeDefined()
      expect(evicted).toEqual([7])
    }).pipe(Effect.provide(layerWith({})))
  )
})

describe("RateLimiter with worker threads", () => {
  it("a place that gives way passes to the newcomer: another thread cannot take it first", () => {
    const control = createSharedState({ workers: 2 })
    const first = rateLimiterDataPlane(attachSharedState(control.buffers, 0).ipTable, noFloodMemory)
    const second = rateLimiterDataPlane(attachSharedState(control.buffers, 1).ipTable, noFloodMemory)
    const evicted: Array<number> = []
    const refusedOnTheOther: Array<boolean> = []
    // Every place taken on the first thread, every connection waiting for its client. When the longest waiting gives
    // way, the second thread tries for a place at once (as a concurrent thread may): there is none to take.
    const places = Array.from({ length: MAX_PENDING_HANDSHAKES }, (_, i) =>
      first.enterHandshake(`10.3.${i >> 3}.1`, {
        evicted: () => {
          evicted.push(i)
          refusedOnTheOther.push(second.enterHandshake("198.51.100.1", { evicted: () => {} }) === undefined)
        }
      })
    )
    places.forEach((place) => place!.waiting(true))
    const newcomer = first.enterHandshake("192.0.2.9", { evicted: () => {} })
    expect(newcomer).toBeDefined()
    expect(evicted).toEqual([0])
    expect(refusedOnTheOther).toEqual([true])
    expect(control.ipTable.stats().pendingTotal).toBe(MAX_PENDING_HANDSHAKES)
    expect(control.ipTable.lookup("192.0.2.9")?.pending).toBe(1)
    // The evicted connection's own release, when it closes, gives nothing back; the newcomer's does.
    places[0]!.release()
    expect(control.ipTable.stats().pendingTotal).toBe(MAX_PENDING_HANDSHAKES)
    newcomer!.release()
    expect(control.ipTable.stats().pendingTotal).toBe(MAX_PENDING_HANDSHAKES - 1)
    expect(second.enterHandshake("198.51.100.1", { evicted: () => {} })).toBeDefined()
  })
})

describe("RateLimiter and the flood's memory", () => {
  it("tells the thread's flood memory when every place is taken, not when one address is at its own bound", () => {
    const control = createSharedState({ workers: 1 })
    let floods = 0
    const plane = rateLimiterDataPlane(attachSharedState(control.buffers, 0).ipTable, { flooded: () => floods++, saving: () => floods > 0 })
    const places = Array.from({ length: MAX_PENDING_HANDSHAKES_PER_IP }, () => plane.enterHandshake("10.4.0.1", { evicted: () => {} }))
    expect(places.every((place) => place !== undefined)).toBe(true)
    expect(plane.enterHandshake("10.4.0.1", { evicted: () => {} })).toBeUndefined()
    expect(floods).toBe(0)
    for (let i = MAX_PENDING_HANDSHAKES_PER_IP; i < MAX_PENDING_HANDSHAKES; i++) expect(plane.enterHandshake(`10.5.${i >> 3}.1`, { evicted: () => {} })).toBeDefined()
    expect(floods).toBe(0)
    // Every place taken and nobody waiting for a client: refused, and a flood.
    expect(plane.enterHandshake("192.0.2.10", { evicted: () => {} })).toBeUndefined()
    expect(floods).toBe(1)
  })
})

describe("SlidingWindowLimiter", () => {
  it("counts exactly the allowed events of the last window, wherever the window falls", () => {
    const limiter = new SlidingWindowLimiter()
    for (let i = 0; i < 10; i++) expect(limiter.hit("a", 500, 10, 1000)).toBe(true)
    expect(limiter.hit("a", 999, 10, 1000)).toBe(false)
    // Until a full window has passed since the ten, all of them still count.
    expect(limiter.hit("a", 1499, 10, 1000)).toBe(false)
    expect([1, 2, 3].map(() => limiter.hit("a", 1500, 10, 1000))).toEqual([true, true, true])
    expect(limiter.storedEvents).toBe(3)
  })

  it("lets no burst through at a wall-clock minute boundary", () => {
    // Two logins just before a minute boundary and a third just after: still three within one minute.
    const limiter = new SlidingWindowLimiter()
    expect(limiter.hit("a", 59_900, 2, 60_000)).toBe(true)
    expect(limiter.hit("a", 59_950, 2, 60_000)).toBe(true)
    expect(limiter.hit("a", 60_100, 2, 60_000)).toBe(false)
    expect(limiter.hit("a", 119_899, 2, 60_000)).toBe(false)
    // Refused attempts do not extend the wait: one slot frees a minute after the first login.
    expect(limiter.hit("a", 119_900, 2, 60_000)).toBe(true)
    expect(limiter.hit("a", 119_901, 2, 60_000)).toBe(false)
  })

  it("a wall clock stepped back makes nobody wait out the step", () => {
    const limiter = new SlidingWindowLimiter()
    expect([1, 2].map(() => limiter.hit("a", 3_600_000, 2, 10_000))).toEqual([true, true])
    // The clock goes back an hour: the two count from the new now, for one window, not for the hour.
    expect(limiter.hit("a", 0, 2, 10_000)).toBe(false)
    expect(limiter.hit("a", 9_999, 2, 10_000)).toBe(false)
    expect(limiter.hit("a", 10_000, 2, 10_000)).toBe(true)
  })

  it("bounds the events it stores, forgetting the least recently seen addresses first", () => {
    const limiter = new SlidingWindowLimiter(1000, 50)
    for (let i = 0; i < 20; i++) for (let j = 0; j < 5; j++) limiter.hit(`10.0.0.${i}`, i * 10 + j, 5, 10_000)
    expect(limiter.storedEvents).toBeLessThanOrEqual(50)
    expect(limiter.size).toBe(10)
    // The most recent address keeps its count; an evicted one starts again.
    expect(limiter.hit("10.0.0.19", 300, 5, 10_000)).toBe(false)
    expect(limiter.hit("10.0.0.0", 300, 5, 10_000)).toBe(true)
  })

  it("keeps memory bounded however many addresses arrive", () => {
    const limiter = new SlidingWindowLimiter(1000)
    for (let i = 0; i < 50_000; i++) limiter.hit(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, i, 3, 10_000)
    expect(limiter.size).toBe(1000)
    limiter.sweep(50_000 + 20_000, 10_000)
    expect(limiter.size).toBe(0)
  })
})

describe("IP filter rule", () => {
  const filter = (whitelist: Array<string>, blacklist: Array<string>) => compileFilter({ whitelist, blacklist })

  it("allowed when not blacklisted AND (whitelist empty OR whitelisted)", () => {
    const open = filter([], [])
    expect(isAllowed(open, "1.2.3.4")).toBe(true)
    const deny = filter([], ["10.0.0.0/8"])
    expect(isAllowed(deny, "10.1.2.3")).toBe(false)
    expect(isAllowed(deny, "11.1.2.3")).toBe(true)
    const both = filter(["10.0.0.0/8"], ["10.6.6.0/24"])
    expect(isAllowed(both, "10.1.1.1")).toBe(true)
    expect(isAllowed(both, "10.6.6.6")).toBe(false) // blacklist wins inside the whitelist
    expect(isAllowed(both, "192.168.0.1")).toBe(false)
  })

  it("matches IPv6, IPv4-mapped addresses against IPv4 ranges, and single addresses", () => {
    const f = filter(["2001:db8::/32", "192.0.2.7", "::ffff:198.51.100.0/120"], [])
    expect(isAllowed(f, "2001:db8::42")).toBe(true)
    expect(isAllowed(f, "2001:db9::1")).toBe(false)
    expect(isAllowed(f, "::ffff:192.0.2.7")).toBe(true)
    expect(isAllowed(f, "192.0.2.8")).toBe(false)
    expect(isAllowed(f, "198.51.100.200")).toBe(true)
    expect(isAllowed(filter(["10.0.0.0/8"], []), "not an ip")).toBe(false)
  })
})
