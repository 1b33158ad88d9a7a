/**
 * Flags that go from unset to set once for the whole proxy, whichever thread sets them first: what a line logged
 * "once" needs when every worker thread would otherwise log it once of its own. 32 flags in one word of `counters`.
 */
import { countersLayout, int32View, type SharedBuffers } from "./layout.js"

export class OnceFlags {
  private readonly words: Int32Array
  private readonly at: number

  constructor(buffers: SharedBuffers) {
    this.words = int32View(buffers, "counters")
    this.at = countersLayout(buffers.layout).once
  }

  /** Sets flag `bit` (0..31); true for the one call, on any thread, that found it unset. */
  first(bit: number): boolean {
    const mask = 1 << bit
    return (Atomics.or(this.words, this.at, mask) & mask) === 0
  }
}
