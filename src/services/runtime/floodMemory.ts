/**
 * V8's memory-saving mode for this thread's heap while a handshake flood lasts, and collections asked for as the heap
 * grows.
 *
 * Why: a flood's connections that wait for their handshake live long enough to be promoted, so the old generation
 * fills with dead connections, and each thread with a heap (each worker) keeps the pages it grew into between its
 * full collections (docs/benchmarks.md, "Memory under a flood"). In the memory-saving mode V8 makes every full
 * collection a memory-reducing one, which compacts the old generation and gives back the pages it emptied: under the
 * bench's flood a worker's heap then stays 3 to 5 MiB smaller after each collection. Still, V8 lets a heap grow by
 * several MiB between full collections, and with two workers that came to more than the flood's memory bound; so
 * while the mode is on, the heap is looked at every `GOVERN_MS` and collected once it holds `GROWTH_BYTES` more than
 * after the last collection asked for (with two workers the flood's RSS growth went from about 38 to 23 MiB). Both
 * cost speed (in that bench the mode about 7% of the flood connections handled a second, the collections about a
 * quarter more), so they happen only while the flood bound refuses or evicts connections on this thread, and stop
 * once it has not for `CALM_MS`.
 *
 * Without the native addon nothing changes.
 */
import * as v8 from "node:v8"
import { heapCollector, memorySavingSwitch } from "../native/addon.js"

/** How long after the last refusal for the flood bound the mode stays on (ms). */
export const CALM_MS = 10_000
/** How often the heap's size is looked at while the mode is on (ms). */
export const GOVERN_MS = 100
/** How much the heap may grow past what the last collection left before the next is asked for (bytes). */
export const GROWTH_BYTES = 3 * 1024 * 1024

export interface FloodMemory {
  /** The flood bound refused or evicted a connection on this thread just now. */
  readonly flooded: () => void
  /** Whether the memory-saving mode is on (diagnostics and tests). */
  readonly saving: () => boolean
}

/** A thread's heap: the bytes its objects take, and a memory-reducing full collection now. */
export interface HeapControl {
  readonly used: () => number
  readonly collect: () => void
}

/**
 * This thread's: the addon's switch and collector (none without the addon), the monotonic clock, timers that let the
 * process exit.
 */
export const threadFloodMemory = (): FloodMemory => {
  const collect = heapCollector()
  return makeFloodMemory(
    memorySavingSwitch(),
    () => performance.now(),
    (run, delayMs) => setTimeout(run, delayMs).unref(),
    collect === undefined ? undefined : { used: () => v8.getHeapStatistics().used_heap_size, collect }
  )
}

/** `schedule` calls its function once after the delay. */
export const makeFloodMemory = (
  switchMode: ((on: boolean) => void) | undefined,
  now: () => number,
  schedule: (run: () => void, delayMs: number) => void,
  heap?: HeapControl
): FloodMemory => {
  if (switchMode === undefined) return { flooded: () => {}, saving: () => false }
  let on = false
  let lastFlood = 0
  let governing = false
  /** What the heap held after the last collection asked for (or when the mode came on). */
  let floor = 0
  const check = (): void => {
    const calmFor = now() - lastFlood
    if (calmFor >= CALM_MS) {
      on = false
      switchMode(false)
    } else {
      schedule(check, CALM_MS - calmFor)
    }
  }
  const govern = (): void => {
    if (heap === undefined || !on) {
      governing = false
      return
    }
    if (heap.used() > floor + GROWTH_BYTES) {
      heap.collect()
      floor = heap.used()
    }
    schedule(govern, GOVERN_MS)
  }
  return {
    flooded: () => {
      lastFlood = now()
      if (on) return
      on = true
      switchMode(true)
      schedule(check, CALM_MS)
      if (heap !== undefined && !governing) {
        governing = true
        floor = heap.used()
        schedule(govern, GOVERN_MS)
      }
    },
    saving: () => on
  }
}
