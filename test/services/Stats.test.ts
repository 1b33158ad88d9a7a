/** Stats: increments through the data plane, the snapshot, and per-second rates over the last minute on TestClock. */
import { it } from "@effect/vitest"
import { Duration, Effect, TestClock } from "effect"
import { describe, expect } from "vitest"
import { DURATION_BOUNDS_MS, Stats } from "../../src/services/Stats.js"

describe("Stats", () => {
  it.scoped("counts what the data plane reports", () =>
    Effect.gen(function* () {
      const stats = yield* Stats
      const plane = stats.dataPlane
      plane.connectionOpened()
      plane.connectionOpened()
      plane.connectionOpened()
      plane.connectionClosed()
      plane.rejected("banned")
      plane.rejected("banned")
      plane.rejected("flood")
      plane.login()
      plane.ping()
      plane.sessionEnded(100, 2500)
      plane.statusCache("hit")
      plane.statusCache("miss")
      plane.statusCache("stale")
      plane.statusCache("hit")
      const snapshot = yield* stats.snapshot
      expect(snapshot.connections).toMatchObject({ total: 3, active: 2 })
      expect(snapshot.connections.rejected).toMatchObject({ banned: 2, flood: 1, rate_limited: 0, max_connections: 0 })
      expect(snapshot.logins.total).toBe(1)
      expect(snapshot.pings.total).toBe(1)
      expect(snapshot.bytes).toEqual({ in: 100, out: 2500 })
      expect(snapshot.statusCache).toEqual({ hits: 2, misses: 1, stale: 1 })
    }).pipe(Effect.provide(Stats.Default))
  )

  it.scoped("gives logins and pings per second over the last minute", () =>
    Effect.gen(function* () {
      const stats = yield* Stats
      // 120 logins over the first minute: 2 per second.
      for (let second = 0; second < 60; second++) {
        stats.dataPlane.login()
        stats.dataPlane.login()
        yield* TestClock.adjust(Duration.seconds(1))
      }
      expect((yield* stats.snapshot).logins.perSecond).toBeCloseTo(2, 5)
      // A quiet minute after: the rate falls back to 0, the total stays.
      for (let second = 0; second < 60; second++) yield* TestClock.adjust(Duration.seconds(1))
      const quiet = yield* stats.snapshot
      expect(quiet.logins).toEqual({ total: 120, perSecond: 0 })
      // Half a minute of one ping a second: the rate is over what the window holds.
      for (let second = 0; second < 30; second++) {
        stats.dataPlane.ping()
        yield* TestClock.adjust(Duration.seconds(1))
      }
      expect((yield* stats.snapshot).pings.perSecond).toBeCloseTo(0.5, 1)
    }).pipe(Effect.provide(Stats.Default))
  )
})

describe("Stats for telemetry", () => {
  it.scoped("counts handshakes by kind and failures, and buckets the durations", () =>
    Effect.gen(function* () {
      const stats = yield* Stats
      const plane = stats.dataPlane
      plane.handshake("status", 0.2)
      plane.handshake("login", 3)
      plane.handshake("login", 20_000)
      plane.handshake("legacy_status", 1)
      plane.failed()
      plane.connectAttempt(true, 0.8)
      plane.connectAttempt(true, 1)
      plane.connectAttempt(false, 5000)
      const totals = yield* stats.totals
      expect(totals.handshakes).toEqual({ status: 1, login: 2, legacy_status: 1 })
      expect(totals.failed).toBe(1)
      const histograms = yield* stats.histograms
      const at = (bound: number) => DURATION_BOUNDS_MS.indexOf(bound)
      // Upper bounds are inclusive; what is above the last bound has a bucket of its own.
      expect(histograms.handshake.counts[0]).toBe(1)
      expect(histograms.handshake.counts[at(1)]).toBe(1)
      expect(histograms.handshake.counts[at(5)]).toBe(1)
      expect(histograms.handshake.counts[DURATION_BOUNDS_MS.length]).toBe(1)
      expect(histograms.handshake).toMatchObject({ count: 4, sum: 20_004.2 })
      expect(histograms.connectOk.counts[at(1)]).toBe(2)
      expect(histograms.connectOk).toMatchObject({ count: 2, sum: 1.8 })
      expect(histograms.connectFailed.counts[at(5000)]).toBe(1)
      expect(histograms.connectFailed.counts.reduce((sum, count) => sum + count, 0)).toBe(1)
    }).pipe(Effect.provide(Stats.Default))
  )
})
