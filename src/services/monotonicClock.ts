/**
 * Milliseconds on Effect's monotonic clock: its nanoseconds count from an origin fixed at startup (process.hrtime),
 * where its milliseconds are the wall clock. Intervals (ejections, slow-start ramps, idle time, wake deadlines) are
 * measured on it, so a wall clock stepped back does not stretch them, nor one stepped forward cut them. TestClock
 * drives both alike.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

export const monotonicMillisOf = (clock: Clock.Clock): number => Number(clock.unsafeCurrentTimeNanos() / 1_000_000n)

export const monotonicMillis: Effect.Effect<number> = Effect.map(Clock.currentTimeNanos, (nanos) => Number(nanos / 1_000_000n))
