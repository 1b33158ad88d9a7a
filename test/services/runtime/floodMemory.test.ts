/** V8's memory-saving mode and the collections asked for while a handshake flood lasts (services/runtime/floodMemory.ts). */
import { spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { loadNativeAddon } from "../../../src/services/native/addon.js"
import { CALM_MS, GOVERN_MS, GROWTH_BYTES, makeFloodMemory } from "../../../src/services/runtime/floodMemory.js"

/**
 * A switch that records what it was told, a clock the test moves, timers that run when the clock passes them, and a
 * heap whose size the test sets, which a collection brings down to what it holds alive.
 */
const harness = () => {
  const switched: Array<boolean> = []
  let now = 0
  let timers: Array<{ at: number; run: () => void }> = []
  const heap = { used: 10 * MiB, alive: 10 * MiB, collections: 0 }
  const memory = makeFloodMemory(
    (on) => switched.push(on),
    () => now,
    (run, delayMs) => void timers.push({ at: now + delayMs, run }),
    {
      used: () => heap.used,
      collect: () => {
        heap.collections += 1
        heap.used = heap.alive
      }
    }
  )
  /** Moves the clock in steps of at most `step`, running each timer as its time comes. */
  const advance = (ms: number, step = ms) => {
    for (let left = ms; left > 0; left -= step) {
      now += Math.min(step, left)
      const due = timers.filter((timer) => timer.at <= now)
      timers = timers.filter((timer) => timer.at > now)
      due.forEach((timer) => timer.run())
    }
  }
  return { memory, switched, advance, heap, pending: () => timers.length }
}

const MiB = 1024 * 1024

describe("flood memory", () => {
  it("turns the mode on at the first refusal, once however many follow", () => {
    const { memory, switched, advance } = harness()
    expect(memory.saving()).toBe(false)
    memory.flooded()
    advance(100)
    memory.flooded()
    memory.flooded()
    expect(switched).toEqual([true])
    expect(memory.saving()).toBe(true)
  })

  it("turns it off once no refusal came for CALM_MS, and on again at the next flood", () => {
    const { memory, switched, advance, pending } = harness()
    memory.flooded()
    advance(CALM_MS - 1)
    expect(switched).toEqual([true])
    advance(1)
    expect(switched).toEqual([true, false])
    expect(memory.saving()).toBe(false)
    // The heap's look ends at its next turn.
    advance(GOVERN_MS)
    expect(pending()).toBe(0)
    memory.flooded()
    expect(switched).toEqual([true, false, true])
  })

  it("stays on while refusals keep coming, and goes off CALM_MS after the last", () => {
    const { memory, switched, advance } = harness()
    memory.flooded()
    for (let i = 0; i < 5; i++) {
      advance(CALM_MS / 2)
      memory.flooded()
    }
    advance(CALM_MS - 1)
    expect(switched).toEqual([true])
    advance(1)
    expect(switched).toEqual([true, false])
  })

  it("collects once the heap holds GROWTH_BYTES more than after the last collection, looking every GOVERN_MS", () => {
    const { memory, advance, heap } = harness()
    memory.flooded()
    heap.used = 10 * MiB + GROWTH_BYTES
    advance(GOVERN_MS)
    expect(heap.collections).toBe(0)
    heap.used += 1
    advance(GOVERN_MS - 1)
    expect(heap.collections).toBe(0)
    advance(1)
    expect(heap.collections).toBe(1)
    // What the flood holds alive grew: the next bound starts from what the collection left.
    heap.alive = 14 * MiB
    heap.used = 14 * MiB + GROWTH_BYTES + 1
    advance(GOVERN_MS)
    expect(heap.collections).toBe(2)
    heap.used = 14 * MiB + GROWTH_BYTES
    advance(GOVERN_MS * 5, GOVERN_MS)
    expect(heap.collections).toBe(2)
  })

  it("asks for no collection once the mode is off, and looks with one timer however often the flood comes back", () => {
    const { memory, advance, heap, pending } = harness()
    memory.flooded()
    advance(CALM_MS, GOVERN_MS)
    expect(memory.saving()).toBe(false)
    advance(GOVERN_MS)
    expect(pending()).toBe(0)
    heap.used = 100 * MiB
    advance(GOVERN_MS * 3, GOVERN_MS)
    expect(heap.collections).toBe(0)
    // Back within one look: still one timer for the heap (and one for the calm).
    // On again: the bound starts from the heap as it is then.
    memory.flooded()
    advance(CALM_MS, GOVERN_MS)
    expect(memory.saving()).toBe(false)
    memory.flooded()
    expect(pending()).toBe(2)
    heap.used = 100 * MiB + GROWTH_BYTES + 1
    advance(GOVERN_MS)
    expect(heap.collections).toBe(1)
  })

  it("does nothing without the addon's switch", () => {
    const memory = makeFloodMemory(undefined, () => 0, () => {
      throw new Error("nothing to schedule")
    })
    memory.flooded()
    expect(memory.saving()).toBe(false)
  })
})

const loaded = loadNativeAddon()

describe.skipIf(!("addon" in loaded))("the addon's memory-saving switch", () => {
  it("takes a boolean, refuses anything else, and leaves the thread working", () => {
    // A child process, so that the mode does not stay on the test runner's thread.
    const child = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `const { loadNativeAddon } = await import("./dist/services/native/addon.js")
         const { addon } = loadNativeAddon()
         addon.memorySaving(true)
         const kept = []
         for (let i = 0; i < 200000; i++) kept.push({ i })
         addon.memorySaving(false)
         let refused = false
         try { addon.memorySaving(1) } catch (error) { refused = error instanceof TypeError }
         console.log(kept.length, refused)`
      ],
      { encoding: "utf8" }
    )
    expect(child.stderr).toBe("")
    expect(child.stdout.trim()).toBe("200000 true")
  })

  it("collects the calling thread's heap at once: garbage let go of is gone when the call returns", () => {
    const child = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import * as v8 from "node:v8"
         const { loadNativeAddon } = await import("./dist/services/native/addon.js")
         const { addon } = loadNativeAddon()
         let garbage = []
         for (let i = 0; i < 300000; i++) garbage.push({ i, text: "x" + i })
         const before = v8.getHeapStatistics().used_heap_size
         garbage = undefined
         addon.collectGarbage()
         const after = v8.getHeapStatistics().used_heap_size
         console.log(Math.round((before - after) / 1048576))`
      ],
      { encoding: "utf8" }
    )
    expect(child.stderr).toBe("")
    // 300,000 objects and strings: some 20 MiB, nearly all of it given back.
    expect(Number(child.stdout.trim())).toBeGreaterThan(10)
  })
})
