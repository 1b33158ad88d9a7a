// A thread whose wall clock is `stepMs` off the process's when it loads Effect (a clock stepped between the main
// thread's start and this one's): posts its default clock's and the shared-origin clock's nanoseconds, and hrtime.
import { parentPort, workerData } from "node:worker_threads"

const realNow = Date.now
Date.now = () => realNow() + workerData.stepMs
const Clock = await import("effect/Clock")
const { clockOnOrigin } = await import(workerData.monotonicClock)
const hrtime = process.hrtime.bigint()
parentPort.postMessage({
  hrtime,
  own: Clock.make().unsafeCurrentTimeNanos(),
  shared: clockOnOrigin(workerData.origin).unsafeCurrentTimeNanos()
})
