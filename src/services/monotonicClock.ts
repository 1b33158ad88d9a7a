/**
 * Milliseconds on Effect's monotonic clock: its nanoseconds count from an origin fixed at startup (process.hrtime),
 * where its milliseconds are the wall clock. Intervals (ejections, slow-start ramps, idle time, wake deadlines) are
 * measured on it, so a wall clock stepped back does not stretch them, nor one stepped forward cut them. TestClock
 * drives both alike.
 *
 * Each thread's default clock fixes its origin when it loads Effect, from the wall clock of that moment. Times in
 * the shared memory (an address ejected until, recovered at) are read by every thread, so a worker runs on the main
 * thread's origin (`clockOnOrigin`): one started after the wall clock stepped would otherwise read them off by
 * the step (an ejection of 30 s lasting an hour more, or none at all).
 */
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

export const monotonicMillisOf = (clock: Clock.Clock): number => Number(clock.unsafeCurrentTimeNanos() / 1_000_000n)

export const monotonicMillis: Effect.Effect<number> = Effect.map(Clock.currentTimeNanos, (nanos) => Number(nanos / 1_000_000n))

/** The origin of `clock`'s nanoseconds on process.hrtime (the same in every thread of the process). */
export const monotonicOriginOf = (clock: Clock.Clock): bigint => clock.unsafeCurrentTimeNanos() - process.hrtime.bigint()

/** A clock whose nanoseconds are `origin` plus process.hrtime; its milliseconds and sleeps are the default clock's. */
class OriginClock implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  private readonly base = Clock.make()
  constructor(private readonly origin: bigint) {}
  unsafeCurrentTimeMillis(): number {
    return this.base.unsafeCurrentTimeMillis()
  }
  get currentTimeMillis(): Effect.Effect<number> {
    return this.base.currentTimeMillis
  }
  unsafeCurrentTimeNanos(): bigint {
    return this.origin + process.hrtime.bigint()
  }
  get currentTimeNanos(): Effect.Effect<bigint> {
    return Effect.sync(() => this.unsafeCurrentTimeNanos())
  }
  sleep(duration: Duration.Duration): Effect.Effect<void> {
    return this.base.sleep(duration)
  }
}

export const clockOnOrigin = (origin: bigint): Clock.Clock => new OriginClock(origin)
