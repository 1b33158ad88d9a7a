/**
 * Stats: what the proxy has done since it started, for the admin API's `/stats` and its `stats` events, and for
 * telemetry's metrics. The connection path counts through `dataPlane` (plain increments, no allocation, no atomics):
 * each thread writes its own row of a SharedArrayBuffer (the main thread's is the last), so that with worker threads
 * every count is seen by the main thread, which sums the rows. `snapshot` reads them with per-second rates over the
 * last minute, from a sample taken every second; `totals` and `histograms` read the sums as they are.
 *
 * The two durations telemetry exports as histograms (a backend connect attempt, a handshake) are bucketed in the
 * same rows: one count per bucket, the sum and the count, per thread.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { SharedMemory } from "./SharedMemory.js"

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
  "max_connections",
  "already_connected"
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
const HANDSHAKE_STATUS = 9
const HANDSHAKE_LOGIN = 10
const HANDSHAKE_LEGACY = 11
/** Connections that ended on an error (bad bytes, a timeout, a peer gone mid-read) before a relay took them. */
const FAILED = 12
const REJECTED = 13
const rejectSlot = Object.fromEntries(REJECT_REASONS.map((reason, index) => [reason, REJECTED + index])) as Record<RejectReason, number>

/** What a handshake asked for: a server-list ping, a login, or a pre-1.7 (legacy) ping. */
export type HandshakeKind = "status" | "login" | "legacy_status"

/**
 * Upper bounds (inclusive, milliseconds) of the duration buckets; one more bucket counts what is above the last.
 * From a loopback connect (well under a millisecond) to a connect timeout.
 */
export const DURATION_BOUNDS_MS: ReadonlyArray<number> = [0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]
const BUCKETS = DURATION_BOUNDS_MS.length + 1
/** A histogram's slots: the buckets, then the sum (ms), then the count. */
const HISTOGRAM_SLOTS = BUCKETS + 2
const CONNECT_OK = REJECTED + REJECT_REASONS.length
const CONNECT_FAILED = CONNECT_OK + HISTOGRAM_SLOTS
const HANDSHAKE_DURATION = CONNECT_FAILED + HISTOGRAM_SLOTS
const SLOTS = HANDSHAKE_DURATION + HISTOGRAM_SLOTS
const bounds = Float64Array.from(DURATION_BOUNDS_MS)

/** Adds one duration to the histogram at `base` of a row. */
const observe = (counters: Float64Array, base: number, ms: number): void => {
  let bucket = 0
  while (bucket < bounds.length && ms > bounds[bucket]!) bucket++
  counters[base + bucket]! += 1
  counters[base + BUCKETS]! += ms
  counters[base + BUCKETS + 1]! += 1
}

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
  /** A handshake read (or a legacy ping recognised), with how long it took from the connection's accept (ms). */
  readonly handshake: (kind: HandshakeKind, ms: number) => void
  /** A connection that ended on an error before a relay took it. */
  readonly failed: () => void
  /** One backend connect attempt and how long it took (ms). */
  readonly connectAttempt: (ok: boolean, ms: number) => void
}

/** A histogram summed over every thread: counts per bucket of DURATION_BOUNDS_MS (one more above), sum in ms. */
export interface DurationHistogram {
  readonly counts: ReadonlyArray<number>
  readonly sum: number
  readonly count: number
}

/** The counters summed over every thread, as they are now (telemetry's metrics). */
export interface StatsTotals {
  readonly opened: number
  readonly closed: number
  readonly logins: number
  readonly pings: number
  readonly failed: number
  readonly bytesIn: number
  readonly bytesOut: number
  readonly statusCache: { readonly hit: number; readonly miss: number; readonly stale: number }
  readonly handshakes: Readonly<Record<HandshakeKind, number>>
  readonly rejected: Readonly<Record<RejectReason, number>>
}

export interface StatsHistograms {
  readonly connectOk: DurationHistogram
  readonly connectFailed: DurationHistogram
  readonly handshake: DurationHistogram
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

/** The counters of every thread: `threads` rows of SLOTS values. */
export interface StatsBuffer {
  readonly buffer: SharedArrayBuffer
  readonly threads: number
}

export const makeStatsBuffer = (threads: number): StatsBuffer => ({
  buffer: new SharedArrayBuffer(threads * SLOTS * Float64Array.BYTES_PER_ELEMENT),
  threads
})

/**
 * The connections thread `thread`'s row has counted as opened: every one it gave an id to, by this thread and by the
 * workers it replaced in that place (a replacement goes on from there, so that no id is given twice).
 */
export const connectionsOpenedBy = (stats: StatsBuffer, thread: number): number =>
  new Float64Array(stats.buffer, thread * SLOTS * Float64Array.BYTES_PER_ELEMENT, SLOTS)[OPENED]!

/** The increments of one thread, into its own row. */
export const statsDataPlane = (stats: StatsBuffer, thread: number): StatsDataPlane => {
  const counters = new Float64Array(stats.buffer, thread * SLOTS * Float64Array.BYTES_PER_ELEMENT, SLOTS)
  return {
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
    },
    handshake: (kind, ms) => {
      counters[kind === "login" ? HANDSHAKE_LOGIN : kind === "status" ? HANDSHAKE_STATUS : HANDSHAKE_LEGACY]! += 1
      observe(counters, HANDSHAKE_DURATION, ms)
    },
    failed: () => {
      counters[FAILED]! += 1
    },
    connectAttempt: (ok, ms) => observe(counters, ok ? CONNECT_OK : CONNECT_FAILED, ms)
  }
}

export class Stats extends Effect.Service<Stats>()("portal/Stats", {
  scoped: Effect.gen(function* () {
    // One row per worker thread and one for this thread (the last), as many as the shared state has ledgers.
    const memory = yield* Effect.serviceOption(SharedMemory)
    const threads = Option.match(memory, { onNone: () => 1, onSome: (state) => state.buffers.layout.workers + 1 })
    const shared = makeStatsBuffer(threads)
    const dataPlane = statsDataPlane(shared, threads - 1)
    const rows = new Float64Array(shared.buffer)
    /** A counter summed over every thread's row. */
    const total = (slot: number): number => {
      let sum = 0
      for (let thread = 0; thread < threads; thread++) sum += rows[thread * SLOTS + slot]!
      return sum
    }

    /** Ring of (time, logins, pings) samples, oldest overwritten. */
    const times = new Float64Array(WINDOW_SAMPLES)
    const logins = new Float64Array(WINDOW_SAMPLES)
    const pings = new Float64Array(WINDOW_SAMPLES)
    let next = 0
    let filled = 0
    const sample = Effect.map(Clock.currentTimeMillis, (now) => {
      times[next] = now
      logins[next] = total(LOGINS)
      pings[next] = total(PINGS)
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

    const histogram = (base: number): DurationHistogram => ({
      counts: Array.from({ length: BUCKETS }, (_, bucket) => total(base + bucket)),
      sum: total(base + BUCKETS),
      count: total(base + BUCKETS + 1)
    })

    const totals = Effect.sync(
      (): StatsTotals => ({
        opened: total(OPENED),
        closed: total(CLOSED),
        logins: total(LOGINS),
        pings: total(PINGS),
        failed: total(FAILED),
        bytesIn: total(BYTES_IN),
        bytesOut: total(BYTES_OUT),
        statusCache: { hit: total(CACHE_HIT), miss: total(CACHE_MISS), stale: total(CACHE_STALE) },
        handshakes: { status: total(HANDSHAKE_STATUS), login: total(HANDSHAKE_LOGIN), legacy_status: total(HANDSHAKE_LEGACY) },
        rejected: Object.fromEntries(REJECT_REASONS.map((reason) => [reason, total(rejectSlot[reason])])) as Record<RejectReason, number>
      })
    )

    const histograms = Effect.sync(
      (): StatsHistograms => ({
        connectOk: histogram(CONNECT_OK),
        connectFailed: histogram(CONNECT_FAILED),
        handshake: histogram(HANDSHAKE_DURATION)
      })
    )

    const snapshot = Effect.map(Clock.currentTimeMillis, (now): StatsSnapshot => {
      const rejected = Object.fromEntries(REJECT_REASONS.map((reason) => [reason, total(rejectSlot[reason])])) as Record<RejectReason, number>
      return {
        at: now,
        connections: { total: total(OPENED), active: Math.max(0, total(OPENED) - total(CLOSED)), rejected },
        logins: { total: total(LOGINS), perSecond: rate(logins, total(LOGINS), now) },
        pings: { total: total(PINGS), perSecond: rate(pings, total(PINGS), now) },
        bytes: { in: total(BYTES_IN), out: total(BYTES_OUT) },
        statusCache: { hits: total(CACHE_HIT), misses: total(CACHE_MISS), stale: total(CACHE_STALE) }
      }
    })

    return {
      dataPlane,
      snapshot,
      totals,
      histograms,
      /** The rows every thread writes, for worker threads to write theirs. */
      buffer: shared,
      /**
       * A worker thread that is gone ended nothing it had open: its connections count as closed (so that the active
       * count is right for the worker that takes its row), and its sessions as ended with the bytes they had moved
       * when last counted (the registry's totals have the same).
       */
      threadGone: (thread: number, moved: { readonly bytesIn: number; readonly bytesOut: number }) => {
        rows[thread * SLOTS + CLOSED] = rows[thread * SLOTS + OPENED]!
        rows[thread * SLOTS + BYTES_IN] = rows[thread * SLOTS + BYTES_IN]! + moved.bytesIn
        rows[thread * SLOTS + BYTES_OUT] = rows[thread * SLOTS + BYTES_OUT]! + moved.bytesOut
      }
    }
  })
}) {}
