/**
 * The relay watchdog on fake progress: each tick checks a slice of the sessions, a pass over all of them takes ten
 * ticks, and read and write timeouts fire from what the samples show.
 */
import { afterEach, describe, expect, it, vi } from "vitest"
import { type ProgressSample, RelayWatchdog } from "../../src/services/relay/watchdog.js"

const TIMEOUTS = { readMs: 5_000, writeMs: 3_000 }

interface Fake {
  readMark: number
  written: number
  blocked: boolean
  playerWritten: number
  playerBlocked: boolean
  samples: number
  ended: Array<string>
}

const cleanup: Array<() => void> = []
afterEach(() => {
  for (const step of cleanup.splice(0)) step()
})

const setup = (count: number) => {
  const watchdog = new RelayWatchdog()
  const fakes: Array<Fake> = []
  const added: Array<ReturnType<RelayWatchdog["add"]>> = []
  // Deleting every entry stops the watchdog's timer.
  cleanup.push(() => {
    for (const entry of added) watchdog.delete(entry)
  })
  const add = () => {
    const fake: Fake = { readMark: 0, written: 0, blocked: false, playerWritten: 0, playerBlocked: false, samples: 0, ended: [] }
    const sample = (into: ProgressSample) => {
      fake.samples++
      into.readMark = fake.readMark
      into.written = fake.written
      into.blocked = fake.blocked
      into.playerWritten = fake.playerWritten
      into.playerBlocked = fake.playerBlocked
    }
    // As a relay does: a timeout ends the session, which leaves the watchdog.
    const entry = watchdog.add({ sample }, TIMEOUTS, (end) => {
      fake.ended.push(end)
      watchdog.delete(entry)
    }, 0)
    added.push(entry)
    fakes.push(fake)
    return fake
  }
  for (let i = 0; i < count; i++) add()
  for (const fake of fakes) fake.samples = 0
  return { watchdog, fakes, add, added }
}

const pass = (watchdog: RelayWatchdog, now: number) => {
  for (let tick = 0; tick < 10; tick++) watchdog.tick(now)
}

describe("RelayWatchdog", () => {
  it("checks a tenth of the sessions per tick (rounded up), each once per pass", () => {
    const { watchdog, fakes } = setup(25)
    watchdog.tick(100)
    expect(fakes.filter((fake) => fake.samples === 1)).toHaveLength(3)
    expect(fakes.filter((fake) => fake.samples === 0)).toHaveLength(22)
    // 25 sessions, 3 per tick: a pass takes 9 ticks.
    for (let tick = 1; tick < 9; tick++) watchdog.tick(100)
    expect(fakes.every((fake) => fake.samples === 1)).toBe(true)
    for (let tick = 0; tick < 9; tick++) watchdog.tick(200)
    expect(fakes.every((fake) => fake.samples === 2)).toBe(true)
  })

  it("a backend that reads nothing for [timeouts].read ends with read_timeout; one that moves does not", () => {
    const { watchdog, fakes } = setup(12)
    const [quiet, busy] = fakes as [Fake, Fake]
    pass(watchdog, 4_000)
    expect(quiet.ended).toEqual([])
    busy.readMark = 10
    pass(watchdog, 5_000)
    expect(quiet.ended).toEqual(["read_timeout"])
    expect(busy.ended).toEqual([])
  })

  it("writes blocked with no progress for [timeouts].write end with write_timeout", () => {
    const { watchdog, fakes } = setup(3)
    const [stuck, draining] = fakes as [Fake, Fake]
    for (const fake of [stuck, draining]) fake.blocked = true
    for (const fake of fakes) fake.readMark = 1
    pass(watchdog, 1_000)
    draining.written = 500
    pass(watchdog, 3_500)
    expect(stuck.ended).toEqual([])
    pass(watchdog, 4_000)
    expect(stuck.ended).toEqual(["write_timeout"])
    expect(draining.ended).toEqual([])
  })

  it("a player that takes nothing for [timeouts].write ends with player_timeout, and its backend is not blamed meanwhile", () => {
    const { watchdog, fakes } = setup(3)
    // Bytes wait for both players, so Portal reads nothing more from their backends (backpressure).
    const [stalled, slow] = fakes as [Fake, Fake]
    for (const fake of [stalled, slow]) fake.playerBlocked = true
    pass(watchdog, 0)
    pass(watchdog, 2_000)
    slow.playerWritten = 100
    pass(watchdog, 2_900)
    expect(stalled.ended).toEqual([])
    pass(watchdog, 3_000)
    expect(stalled.ended).toEqual(["player_timeout"])
    // The slow one takes a little now and then: its backend's silence (5 s and more) is the backpressure's.
    for (const now of [5_000, 7_000, 9_000]) {
      slow.playerWritten += 100
      pass(watchdog, now)
    }
    expect(slow.ended).toEqual([])
    // Once nothing waits for it, the backend's silence counts again from then.
    slow.playerBlocked = false
    pass(watchdog, 13_000)
    expect(slow.ended).toEqual([])
    pass(watchdog, 14_000)
    expect(slow.ended).toEqual(["read_timeout"])
    expect(fakes[2]!.ended).toEqual(["read_timeout"])
  })

  it("sessions added or removed during a pass are handled: removed ones are never sampled again", () => {
    const { watchdog, fakes, add, added } = setup(20)
    watchdog.tick(10)
    const removed = fakes[19] as Fake
    watchdog.delete(added[19]!)
    const late = add()
    late.samples = 0
    for (let tick = 1; tick < 12; tick++) watchdog.tick(10)
    expect(removed.samples).toBe(0)
    expect(late.samples).toBeGreaterThanOrEqual(1)
    expect(watchdog.size).toBe(20)
  })

  it("a removed entry lets go of its session's callbacks (a replaced Set table may keep the entry itself)", () => {
    const { watchdog, fakes, added } = setup(2)
    const [entry, other] = added as [ReturnType<RelayWatchdog["add"]>, ReturnType<RelayWatchdog["add"]>]
    watchdog.delete(entry)
    expect(entry.progress).toBeUndefined()
    expect(entry.onTimeout).toBeUndefined()
    expect(other.progress).toBeDefined()
    pass(watchdog, 10_000)
    expect(fakes[0]!.samples).toBe(0)
    expect(fakes[1]!.ended).toEqual(["read_timeout"])
  })

  it("runs on a monotonic clock: the wall clock stepped an hour forward times nobody out", async () => {
    const watchdog = new RelayWatchdog()
    const ended: Array<string> = []
    const entry = watchdog.add({ sample: (into) => Object.assign(into, { readMark: 0, written: 0, blocked: false, playerWritten: 0, playerBlocked: false }) }, TIMEOUTS, (end) => {
      ended.push(end)
    })
    cleanup.push(() => watchdog.delete(entry))
    const wallClock = Date.now()
    const stepped = vi.spyOn(Date, "now").mockImplementation(() => wallClock + 3_600_000)
    cleanup.push(() => stepped.mockRestore())
    // The watchdog's own timer makes a full pass over its one session within 1 s.
    await new Promise((resolve) => setTimeout(resolve, 1_200))
    expect(ended).toEqual([])
    expect(watchdog.size).toBe(1)
  })
})
