/** V8's memory-saving mode while a handshake flood lasts (services/runtime/floodMemory.ts), on a clock of its own. */
import { spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { loadNativeAddon } from "../../../src/services/native/addon.js"
import { CALM_MS, makeFloodMemory } from "../../../src/services/runtime/floodMemory.js"

/** A switch that records what it was told, a clock the test moves, and timers that run when the clock passes them. */
const harness = () => {
  const switched: Array<boolean> = []
  let now = 0
  let timers: Array<{ at: number; run: () => void }> = []
  const memory = makeFloodMemory(
    (on) => switched.push(on),
    () => now,
    (run, delayMs) => void timers.push({ at: now + delayMs, run })
  )
  const advance = (ms: number) => {
    now += ms
    const due = timers.filter((timer) => timer.at <= now)
    timers = timers.filter((timer) => timer.at > now)
    due.forEach((timer) => timer.run())
  }
  return { memory, switched, advance, pending: () => timers.length }
}

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
})
