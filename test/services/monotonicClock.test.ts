/**
 * A worker thread's monotonic clock runs on the main thread's origin: times kept in the shared memory (an address's
 * ejection, its slow-start ramp) mean the same on every thread, whatever the wall clock did between their starts.
 */
import { resolve } from "node:path"
import { Worker } from "node:worker_threads"
import * as Clock from "effect/Clock"
import { describe, expect, it } from "vitest"
import { monotonicOriginOf } from "../../src/services/monotonicClock.js"

const HOUR_NS = 3_600_000_000_000n
const MS_NS = 1_000_000n

const inSteppedThread = (stepMs: number, origin: bigint) =>
  new Promise<{ hrtime: bigint; own: bigint; shared: bigint }>((done, fail) => {
    const worker = new Worker(resolve("test/peers/steppedClockWorker.mjs"), {
      workerData: { stepMs, origin, monotonicClock: resolve("dist/services/monotonicClock.js") }
    })
    worker.once("message", (message) => {
      done(message)
      void worker.terminate()
    })
    worker.once("error", fail)
  })

describe("the monotonic clock across threads", () => {
  it("a thread started after the wall clock stepped an hour keeps the main thread's time on the shared origin", async () => {
    const origin = monotonicOriginOf(Clock.make())
    const there = await inSteppedThread(3_600_000, origin)
    const here = origin + there.hrtime
    // The thread's own default clock is an hour off: what the worker ran on before.
    expect(there.own - here).toBeGreaterThan(HOUR_NS - 50n * MS_NS)
    // On the shared origin it reads what this thread reads at the same moment (a few µs later, never earlier).
    expect(there.shared - here).toBeGreaterThanOrEqual(0n)
    expect(there.shared - here).toBeLessThan(MS_NS)
  })

  it("the origin is this thread's clock: nanoseconds on it agree with the default clock's", () => {
    const clock = Clock.make()
    const origin = monotonicOriginOf(clock)
    const difference = origin + process.hrtime.bigint() - clock.unsafeCurrentTimeNanos()
    expect(difference < 0n ? -difference : difference).toBeLessThan(MS_NS)
  })
})
