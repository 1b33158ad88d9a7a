/** The balancer's shared per-address state: AddressState views, least_conn counts, locks, resets, pick order. */
import { describe, expect, it } from "vitest"
import type { BackendAddress } from "../../../src/schema/ServerConfig.js"
import { type AddressState, freshState, orderCandidates } from "../../../src/services/balancer/strategy.js"
import { attachSharedState, createSharedState } from "../../../src/services/shared/SharedState.js"

const address = (port: number, weight = 1): BackendAddress => ({ host: "127.0.0.1", port, weight }) as BackendAddress

const plain = (state: AddressState) => ({
  active: state.active,
  currentWeight: state.currentWeight,
  failures: state.failures,
  ejectedUntil: state.ejectedUntil,
  recoveredAt: state.recoveredAt,
  healthy: state.healthy,
  lastPicked: state.lastPicked
})

describe("SharedBalancer state", () => {
  it("a slot never written reads as freshState(), and every field round-trips, seen by every thread", () => {
    const control = createSharedState({ workers: 1, addressSlots: 8 })
    const worker = attachSharedState(control.buffers, 0)
    const state = worker.balancer.state(3)
    expect(plain(state)).toEqual(freshState())
    state.currentWeight = -2.5
    state.failures = 4
    state.ejectedUntil = 123_456.5
    state.recoveredAt = 0
    state.healthy = false
    state.lastPicked = 17
    state.active = 2
    const seen = control.balancer.state(3)
    expect(plain(seen)).toEqual({
      active: 2,
      currentWeight: -2.5,
      failures: 4,
      ejectedUntil: 123_456.5,
      recoveredAt: 0,
      healthy: false,
      lastPicked: 17
    })
    seen.recoveredAt = undefined
    seen.healthy = true
    expect(state.recoveredAt).toBeUndefined()
    expect(state.healthy).toBe(true)
    // Neighbours are untouched.
    expect(plain(worker.balancer.state(2))).toEqual(freshState())
    expect(plain(worker.balancer.state(4))).toEqual(freshState())
  })

  it("gives the same view object for a slot on every call (a login allocates none)", () => {
    const { balancer } = createSharedState({ workers: 1, addressSlots: 8 })
    expect(balancer.state(5)).toBe(balancer.state(5))
    expect(balancer.pickCounter(1)).toBe(balancer.pickCounter(1))
    expect(() => balancer.state(8)).toThrow(RangeError)
  })

  it("counts sessions for least_conn with idempotent releases, and gives back a dead worker's", () => {
    const control = createSharedState({ workers: 2, addressSlots: 8 })
    const worker0 = attachSharedState(control.buffers, 0)
    const worker1 = attachSharedState(control.buffers, 1)
    const dead = [worker0.balancer.acquire(1), worker0.balancer.acquire(1), worker0.balancer.acquire(2)]
    const alive = worker1.balancer.acquire(1)
    expect(control.balancer.state(1).active).toBe(3)
    alive()
    alive()
    expect(control.balancer.state(1).active).toBe(2)
    expect(control.balancer.releaseWorker(0)).toBe(3)
    expect([control.balancer.state(1).active, control.balancer.state(2).active]).toEqual([0, 0])
    for (const release of dead) release()
    expect(control.balancer.state(1).active).toBe(0)
  })

  it("reset makes a slot fresh for a new address; sessions of the old one change nothing when they end", () => {
    const control = createSharedState({ workers: 1, addressSlots: 8 })
    const worker = attachSharedState(control.buffers, 0)
    const old = worker.balancer.acquire(6)
    const state = worker.balancer.state(6)
    Object.assign(state, { currentWeight: 3, failures: 2, ejectedUntil: 99, recoveredAt: 5, healthy: false, lastPicked: 9 })
    control.balancer.reset(6)
    expect(plain(state)).toEqual(freshState())
    const fresh = worker.balancer.acquire(6)
    old()
    expect(state.active).toBe(1)
    fresh()
    expect(state.active).toBe(0)
  })

  it("orders candidates over shared state exactly as over plain objects, with one pick counter per server", () => {
    const control = createSharedState({ workers: 2, addressSlots: 8, serverSlots: 2 })
    const threads = [attachSharedState(control.buffers, 0), attachSharedState(control.buffers, 1)]
    const addresses = [address(1, 5), address(2, 1), address(3, 1)]
    const local = addresses.map(() => freshState())
    const order = (strategy: "round_robin" | "least_conn", turn: number) => {
      const { balancer } = threads[turn % 2]!
      expect(balancer.lockServer(0)).toBe(true)
      try {
        const candidates = addresses.map((a, i) => ({ address: a, state: balancer.state(i) }))
        return orderCandidates(strategy, candidates, 0, undefined, balancer.pickCounter(0)).map((c) => c.address.port)
      } finally {
        balancer.unlockServer(0)
      }
    }
    // Smooth weighted round robin, the threads taking turns: 5:1:1 in the nginx order.
    const shared = Array.from({ length: 14 }, (_, turn) => order("round_robin", turn)[0])
    const expected = Array.from({ length: 14 }, () =>
      orderCandidates("round_robin", addresses.map((a, i) => ({ address: a, state: local[i]! })), 0, undefined)[0]!.address.port
    )
    expect(shared).toEqual(expected)
    expect(shared.filter((port) => port === 1)).toHaveLength(10)
    // least_conn ties go to the address picked least recently, whichever thread picked it.
    const ties = Array.from({ length: 6 }, (_, turn) => order("least_conn", turn)[0])
    expect(new Set(ties.slice(0, 3)).size).toBe(3)
    expect(ties.slice(3)).toEqual(ties.slice(0, 3))
    expect(control.balancer.nextPick(0)).toBe(21)
    expect(control.balancer.nextPick(1)).toBe(1)
  })

  it("server locks: forceUnlock frees those of a dead worker; the control thread gives up after a while", () => {
    const control = createSharedState({ workers: 2, serverSlots: 4 })
    const worker1 = attachSharedState(control.buffers, 1)
    expect(worker1.balancer.lockServer(2)).toBe(true)
    expect(worker1.balancer.lockServer(3)).toBe(true)
    expect(control.balancer.lockServer(2)).toBe(false)
    expect(control.balancer.forceUnlock(0)).toBe(0)
    expect(control.releaseWorker(1)).toMatchObject({ locksFreed: 2, sessions: 0, connections: 0, players: 0, handshakes: 0 })
    expect(control.balancer.lockServer(2)).toBe(true)
    control.balancer.unlockServer(2)
  })
})
