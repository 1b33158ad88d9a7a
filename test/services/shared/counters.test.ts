/** Connection and player counters on one thread: limits, idempotent releases, ledgers, resets. */
import { describe, expect, it } from "vitest"
import { COUNT_MASK, generationOf, countOf, record, resetLedger, resetPlaces, take } from "../../../src/services/shared/places.js"
import { attachSharedState, createSharedState } from "../../../src/services/shared/SharedState.js"

describe("connections", () => {
  it("takes at most `max` places; 0 means no limit; releases are idempotent", () => {
    const { connections } = createSharedState({ workers: 1 })
    const held = [connections.enter(2), connections.enter(2)]
    expect(held.every((r) => r !== undefined)).toBe(true)
    expect(connections.enter(2)).toBeUndefined()
    expect(connections.count()).toBe(2)
    held[0]!()
    held[0]!()
    expect(connections.count()).toBe(1)
    expect(connections.enter(2)).toBeDefined()
    const unlimited = Array.from({ length: 100 }, () => connections.enter(0))
    expect(unlimited.every((r) => r !== undefined)).toBe(true)
    expect(connections.count()).toBe(102)
    for (const release of unlimited) release!()
    expect(connections.count()).toBe(2)
  })

  it("releaseWorker gives back a dead worker's places only; its late releases change nothing", () => {
    const control = createSharedState({ workers: 2 })
    const worker0 = attachSharedState(control.buffers, 0)
    const worker1 = attachSharedState(control.buffers, 1)
    const dead = [worker0.connections.enter(0)!, worker0.connections.enter(0)!, worker0.connections.enter(0)!]
    const alive = worker1.connections.enter(0)!
    expect(control.connections.count()).toBe(4)
    expect(control.connections.releaseWorker(0)).toBe(3)
    expect(control.connections.releaseWorker(0)).toBe(0)
    expect(control.connections.count()).toBe(1)
    for (const release of dead) release()
    expect(control.connections.count()).toBe(1)
    alive()
    expect(control.connections.count()).toBe(0)
  })
})

describe("players", () => {
  it("counts per server slot with its own limit", () => {
    const { players } = createSharedState({ workers: 1, serverSlots: 8 })
    const a = [players.admit(3, 2), players.admit(3, 2)]
    expect(players.admit(3, 2)).toBeUndefined()
    expect(players.admit(4, 2)).toBeDefined()
    expect(players.admit(5, 0)).toBeDefined()
    expect([players.count(3), players.count(4), players.count(5), players.count(6)]).toEqual([2, 1, 1, 0])
    a[0]!()
    a[0]!()
    expect(players.count(3)).toBe(1)
    expect(() => players.admit(8, 0)).toThrow(RangeError)
    expect(() => players.count(-1)).toThrow(RangeError)
  })

  it("a reset slot starts from zero and late releases of its previous server change nothing", () => {
    const control = createSharedState({ workers: 1, serverSlots: 4 })
    const worker = attachSharedState(control.buffers, 0)
    const old = [worker.players.admit(1, 0)!, worker.players.admit(1, 0)!]
    control.players.reset(1)
    expect(control.players.count(1)).toBe(0)
    const fresh = worker.players.admit(1, 1)!
    expect(worker.players.admit(1, 1)).toBeUndefined()
    for (const release of old) release()
    expect(control.players.count(1)).toBe(1)
    // A worker dying now gives back the new server's place only.
    expect(control.players.releaseWorker(0)).toBe(1)
    expect(control.players.count(1)).toBe(0)
    fresh()
    expect(control.players.count(1)).toBe(0)
  })

  it("releaseWorker gives back a dead worker's players on every server", () => {
    const control = createSharedState({ workers: 2, serverSlots: 16 })
    const worker0 = attachSharedState(control.buffers, 0)
    const worker1 = attachSharedState(control.buffers, 1)
    for (let slot = 0; slot < 16; slot++) worker0.players.admit(slot, 0)
    worker0.players.admit(15, 0)
    worker1.players.admit(15, 0)
    expect(control.players.releaseWorker(0)).toBe(17)
    expect(Array.from({ length: 16 }, (_, slot) => control.players.count(slot))).toEqual([...Array(15).fill(0), 1])
  })
})

describe("places", () => {
  it("a count never spills into the generation", () => {
    const words = new Int32Array(new SharedArrayBuffer(8))
    words[0] = COUNT_MASK - 1
    expect(take(words, 0, 0)).toBe(0)
    expect(take(words, 0, 0)).toBe(-1)
    expect(countOf(words[0]!)).toBe(COUNT_MASK)
    expect(generationOf(words[0]!)).toBe(0)
  })

  it("generations wrap around, and a ledger recorded under the new generation is not reset", () => {
    const words = new Int32Array(new SharedArrayBuffer(8))
    let generation = 0
    for (let i = 0; i < 1024; i++) generation = resetPlaces(words, 0)
    expect(generation).toBe(0)
    generation = resetPlaces(words, 0)
    expect(generation).toBe(1)
    record(words, 1, generation)
    resetLedger(words, 1, generation)
    expect(countOf(words[1]!)).toBe(1)
    record(words, 1, 2)
    expect([generationOf(words[1]!), countOf(words[1]!)]).toEqual([2, 1])
  })
})

describe("flags set once", () => {
  it("each flag is first once for all threads together, and the connection count beside them is untouched", () => {
    const control = createSharedState({ workers: 2 })
    const worker0 = attachSharedState(control.buffers, 0)
    const worker1 = attachSharedState(control.buffers, 1)
    const release = worker0.connections.enter(0)!
    expect(worker1.once.first(0)).toBe(true)
    expect(worker0.once.first(0)).toBe(false)
    expect(worker1.once.first(0)).toBe(false)
    expect(worker0.once.first(1)).toBe(true)
    expect(control.once.first(1)).toBe(false)
    expect(control.once.first(31)).toBe(true)
    // A replacement worker attaches to the same state: what was logged once stays logged.
    expect(attachSharedState(control.buffers, 0).once.first(0)).toBe(false)
    expect(control.connections.count()).toBe(1)
    release()
    expect(control.connections.count()).toBe(0)
  })
})
