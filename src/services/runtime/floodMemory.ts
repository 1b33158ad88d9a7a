/**
 * V8's memory-saving mode for this thread's heap while a handshake flood lasts.
 *
 * Why: a flood's connections that wait for their handshake live long enough to be promoted, so the old generation
 * fills with dead connections, and each thread with a heap (each worker) keeps the pages it grew into between its
 * full collections (docs/benchmarks.md, "Memory under a flood"). In the memory-saving mode V8 makes every full
 * collection a memory-reducing one, which compacts the old generation and gives back the pages it emptied: under the
 * bench's flood a worker's heap then stays 3 to 5 MiB smaller after each collection. The mode costs some speed (7%
 * fewer flood connections handled a second in that bench), so it is on only while the flood bound refuses or evicts
 * connections on this thread, and goes off once it has not for `CALM_MS`.
 *
 * Without the native addon nothing changes.
 */
import { memorySavingSwitch } from "../native/addon.js"

/** How long after the last refusal for the flood bound the mode stays on (ms). */
export const CALM_MS = 10_000

export interface FloodMemory {
  /** The flood bound refused or evicted a connection on this thread just now. */
  readonly flooded: () => void
  /** Whether the memory-saving mode is on (diagnostics and tests). */
  readonly saving: () => boolean
}

/** This thread's: the addon's switch (none without the addon), the monotonic clock, timers that let the process exit. */
export const threadFloodMemory = (): FloodMemory =>
  makeFloodMemory(
    memorySavingSwitch(),
    () => performance.now(),
    (run, delayMs) => setTimeout(run, delayMs).unref()
  )

/** `schedule` calls its function once after the delay. */
export const makeFloodMemory = (
  switchMode: ((on: boolean) => void) | undefined,
  now: () => number,
  schedule: (run: () => void, delayMs: number) => void
): FloodMemory => {
  if (switchMode === undefined) return { flooded: () => {}, saving: () => false }
  let on = false
  let lastFlood = 0
  const check = (): void => {
    const calmFor = now() - lastFlood
    if (calmFor >= CALM_MS) {
      on = false
      switchMode(false)
    } else {
      schedule(check, CALM_MS - calmFor)
    }
  }
  return {
    flooded: () => {
      lastFlood = now()
      if (on) return
      on = true
      switchMode(true)
      schedule(check, CALM_MS)
    },
    saving: () => on
  }
}
