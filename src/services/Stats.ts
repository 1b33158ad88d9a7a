/**
 * Stats: what the proxy has done since it started, for the admin API's `/stats` and its `stats` events. The
 * connection path counts through `dataPlane` (plain increments, no allocation); the counters live in one
 * Float64Array so that they can move into shared memory when the data plane runs in worker threads. `snapshot` reads
 * them with per-second rates over the last minute, from a sample taken every second.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

/** Why a connection was refused or given up on. */
export const REJECT_REASONS = [
  "ip_filter",
  "banned",
  "rate_limited",
  "flood",
  "unknown_domain",
  "server_full",
  "unavailable",
  "backend_unreachable",
  "max_connections"
] as const
export type RejectReason = (typeof REJECT_REASONS)[number]

// Counter slots: fixed ones first, then one per reject reason.
const OPENED = 0
const CLOSED = 1
const LOGINS = 2
const PINGS = 3
const BYTES_IN = 4
const BYTES_OUT = 5
const CACHE_HIT = 6
const CACHE_MISS = 7
const CACHE_STALE = 8
const REJECTED = 9
const SLOTS = REJECTED + REJECT_REASONS.length
const rejectSlot = Object.fromEntries(REJECT_REASONS.map((reason, index) => [reason, REJECTED + index])) as Record<RejectReason, number>

/** The connection path's surface: synchronous increments. */
export interface StatsDataPlane {
  readonly connectionOpened: () => void
  readonly connectionClosed: () => void
  readonly rejected: (reason: RejectReason) => void
  /** A player handed to a relay. */
  readonly login: () => void
  /** A status ping answered (modern or legacy). */
  readonly ping: () => void
  /** A relayed session ended, with the bytes it moved from and to the player. */
  readonly sessionEnded: (bytesIn: number, bytesOut: number) => void
  readonly statusCache: (outcome: "hit" | "miss" | "stale") => void
}

export interface StatsSnapshot {
  /** Epoch milliseconds. */
  readonly at: number
  readonly connections: {
    readonly total: number
    readonly active: number
    readonly rejected: Readonly<Record<RejectReason, number>>
  }
  readonly logins: { readonly total: number; readonly perSecond: number }
  readonly pings: { readonly total: number; readonly perSecond: number }
  /** Bytes of sessions that have ended (live sessions are counted by the player registry). */
  readonly bytes: { readonly in: number; readonly out: number }
  readonly statusCache: { readonly hits: number; readonly misses: number; readonly stale: number }
}

/** Samples kept for the rates: one a second over a minute, plus the one a minute ago. */
const WINDOW_SAMPLES = 61

export class Stats extends Effect.Service<Stats>()("portal/Stats", {
  scoped: Effect.gen(function* () {
    const counters = new Float64Array(SLOTS)
    const dataPlane: StatsDataPlane = {
      connectionOpened: () => {
        counters[OPENED]! += 1
      },
      connectionClosed: () => {
        counters[CLOSED]! += 1
      },
      rejected: (reason) => {
        counters[rejectSlot[reason]]! += 1
      },
      login: () => {
        counters[LOGINS]! += 1
      },
      ping: () => {
        counters[PINGS]! += 1
      },
      sessionEnded: (bytesIn, bytesOut) => {
        counters[BYTES_IN]! += bytesIn
        counters[BYTES_OUT]! += bytesOut
      },
      statusCache: (outcome) => {
        counters[outcome === "hit" ? CACHE_HIT : outcome === "miss" ? CACHE_MISS : CACHE_STALE]! += 1
      }
    }

    /** Ring of (time, logins, pings) samples, oldest overwritten. */
    const times = new Float64Array(WINDOW_SAMPLES)
    const logins = new Float64Array(WINDOW_SAMPLES)
    const pings = new Float64Array(WINDOW_SAMPLES)
    let next = 0
    let filled = 0
    const sample = Effect.map(Clock.currentTimeMillis, (now) => {
      times[next] = now
      logins[next] = counters[LOGINS]!
      pings[next] = counters[PINGS]!
      next = (next + 1) % WINDOW_SAMPLES
      filled = Math.min(filled + 1, WINDOW_SAMPLES)
    })
    yield* sample
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(Duration.seconds(1)), sample)))

    /** Per-second rate of a counter since the oldest sample (at most a minute ago). */
    const rate = (series: Float64Array, current: number, now: number): number => {
      const oldest = filled < WINDOW_SAMPLES ? 0 : next
      const seconds = (now - times[oldest]!) / 1000
      return seconds <= 0 ? 0 : Math.max(0, current - series[oldest]!) / seconds
    }

    const snapshot = Effect.map(Clock.currentTimeMillis, (now): StatsSnapshot => {
      const rejected = Object.fromEntries(REJECT_REASONS.map((reason) => [reason, counters[rejectSlot[reason]]!])) as Record<RejectReason, number>
      return {
        at: now,
        connections: { total: counters[OPENED]!, active: Math.max(0, counters[OPENED]! - counters[CLOSED]!), rejected },
        logins: { total: counters[LOGINS]!, perSecond: rate(logins, counters[LOGINS]!, now) },
        pings: { total: counters[PINGS]!, perSecond: rate(pings, counters[PINGS]!, now) },
        bytes: { in: counters[BYTES_IN]!, out: counters[BYTES_OUT]! },
        statusCache: { hits: counters[CACHE_HIT]!, misses: counters[CACHE_MISS]!, stale: counters[CACHE_STALE]! }
      }
    })

    return { dataPlane, snapshot }
  })
}) {}
