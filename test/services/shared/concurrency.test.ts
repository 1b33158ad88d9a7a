/**
 * Real worker threads hammering one shared state at once: the totals are exact (limits never exceeded, never
 * under-used), everything is given back, and a dead worker's places and locks are recovered.
 */
import { Worker } from "node:worker_threads"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { int32View } from "../../../src/services/shared/layout.js"
import { createSharedState, type SharedState, type SharedStateOptions } from "../../../src/services/shared/SharedState.js"
import { type Compiled, compileForThreads } from "./compile.js"
import type { HammerInput } from "./hammer.worker.js"

let compiled: Compiled

beforeAll(() => {
  compiled = compileForThreads(["test/services/shared/hammer.worker.ts", "src/services/balancer/strategy.ts"])
})
afterAll(() => compiled.remove())

interface Run {
  readonly results: Array<any>
  readonly sync: Int32Array
}

/** Runs `task` on `workers` threads at once and collects each one's last message. */
const hammer = async (state: SharedState, task: HammerInput["task"], workers: number): Promise<Run> => {
  const sync = new SharedArrayBuffer(256)
  const results = await Promise.all(
    Array.from({ length: workers }, (_, index) => {
      const data: HammerInput = { buffers: state.buffers, index, workers, task, sync }
      const worker = new Worker(compiled.file("test/services/shared/hammer.worker.ts"), { workerData: data })
      return new Promise<unknown>((resolve, reject) => {
        let last: unknown
        worker.on("message", (message) => (last = message))
        worker.on("error", reject)
        worker.on("exit", (code) => (code === 0 ? resolve(last) : reject(new Error(`worker ${index} exited with ${code}`))))
      })
    })
  )
  return { results, sync: new Int32Array(sync) }
}

const make = (workers: number, options: Partial<SharedStateOptions> = {}) => createSharedState({ workers, ...options })

describe("shared state under real threads", () => {
  it.each([2, 4])("rate windows: exactly `limit` allowed per address and window, %i threads", async (workers) => {
    const state = make(workers)
    const { results } = await hammer(state, "rate", workers)
    for (let phase = 0; phase < 3; phase++) {
      const perAddress = Array.from({ length: 500 }, (_, n) => results.reduce((sum, r) => sum + r.allowed[phase][n], 0))
      expect(new Set(perAddress), `phase ${phase}`).toEqual(new Set([20]))
    }
    // The last window's events are stored, nothing more: 500 addresses x 20.
    expect(state.ipTable.stats()).toEqual({ addresses: 500, storedEvents: 500 * 20, pendingTotal: 0 })
  })

  it.each([2, 4])("handshakes: bounds hold while eviction churns the table, and everything comes back, %i threads", async (workers) => {
    const state = make(workers, { ipSlots: 1024, ipChunks: 1024 })
    const { results } = await hammer(state, "handshakes", workers)
    expect(results.reduce((sum, r) => sum + r.violations, 0)).toBe(0)
    expect(results.reduce((sum, r) => sum + r.taken, 0)).toBeGreaterThan(1000)
    expect(results.reduce((sum, r) => sum + r.refused, 0)).toBeGreaterThan(0)
    const stats = state.ipTable.stats()
    expect(stats.pendingTotal).toBe(0)
    expect(stats.addresses).toBeLessThanOrEqual(1024)
    expect(stats.storedEvents).toBeGreaterThan(0)
    // A sweep long after forgets every address: the lists and counts are consistent.
    expect(state.ipTable.sweep(1e12, 1000, 1000, 2048)).toBe(stats.addresses)
    expect(state.ipTable.stats()).toEqual({ addresses: 0, storedEvents: 0, pendingTotal: 0 })
    // And the table works afterwards, to its full size.
    for (let i = 0; i < 1024; i++) expect(state.ipTable.hit("login", `10.1.${i >> 8}.${i & 255}`, 0, 1, 1000)).toBe(true)
    expect(state.ipTable.stats()).toEqual({ addresses: 1024, storedEvents: 1024, pendingTotal: 0 })
  })

  it.each([2, 4])("connections: never more than max at once, exactly max kept, back to zero, %i threads", async (workers) => {
    const state = make(workers)
    const { results, sync } = await hammer(state, "connections", workers)
    expect(results.reduce((sum, r) => sum + r.violations, 0)).toBe(0)
    expect(results.reduce((sum, r) => sum + r.taken, 0)).toBeGreaterThan(1000)
    expect(Atomics.load(sync, 1)).toBe(0)
    expect(results.reduce((sum, r) => sum + r.kept, 0)).toBe(1000)
    expect(state.connections.count()).toBe(1000)
    for (let index = 0; index < workers; index++) state.releaseWorker(index)
    expect(state.connections.count()).toBe(0)
  })

  it.each([2, 4])("players: max per server at once and exactly max kept per server, %i threads", async (workers) => {
    const state = make(workers, { serverSlots: 8 })
    const { results } = await hammer(state, "players", workers)
    expect(results.reduce((sum, r) => sum + r.violations, 0)).toBe(0)
    const kept = Array.from({ length: 8 }, (_, slot) => results.reduce((sum, r) => sum + r.kept[slot], 0))
    expect(kept).toEqual(Array(8).fill(5))
    expect(Array.from({ length: 8 }, (_, slot) => state.players.count(slot))).toEqual(Array(8).fill(5))
  })

  it.each([2, 4])("balancer: least_conn counts back to zero, round robin exact under the server lock, %i threads", async (workers) => {
    const state = make(workers, { addressSlots: 32 })
    const { results } = await hammer(state, "balancer", workers)
    expect(Array.from({ length: 16 }, (_, slot) => state.balancer.state(slot).active)).toEqual(Array(16).fill(0))
    expect(Array.from({ length: 4 }, (_, i) => state.balancer.state(16 + i).active)).toEqual(Array(4).fill(250 * workers))
    const picks = [0, 1, 2].map((port) => results.reduce((sum, r) => sum + r.picks[port], 0))
    const cycles = (10_002 * workers) / 6
    expect(picks).toEqual([3 * cycles, 2 * cycles, cycles])
    expect(state.balancer.nextPick(0)).toBe(10_002 * workers + 1)
  })

  it.each([2, 4])("players online: one holder per UUID at any moment, and every claim given back, %i threads", async (workers) => {
    const state = make(workers)
    const { results, sync } = await hammer(state, "online", workers)
    expect(results.reduce((sum, r) => sum + r.violations, 0)).toBe(0)
    // Both outcomes happened: the threads met on the same UUIDs, and claims went through.
    expect(results.map((r) => r.claimed > 100), JSON.stringify(results)).toEqual(Array(workers).fill(true))
    expect(results.reduce((sum, r) => sum + r.taken, 0)).toBeGreaterThan(0)
    expect(state.online.count()).toBe(0)
    expect(Array.from(sync.subarray(1, 17))).toEqual(Array(16).fill(0))
  })

  it("a worker that dies holding places and a lock: releaseWorker gives everything back", async () => {
    const state = make(2, { serverSlots: 4, addressSlots: 8 })
    const data: HammerInput = { buffers: state.buffers, index: 1, workers: 2, task: "crash", sync: new SharedArrayBuffer(64) }
    const worker = new Worker(compiled.file("test/services/shared/hammer.worker.ts"), { workerData: data })
    const crashed = new Promise<Error>((resolve) => worker.on("error", resolve))
    const exited = new Promise((resolve) => worker.on("exit", resolve))
    await new Promise((resolve) => worker.once("message", resolve))
    expect(state.ipTable.stats().pendingTotal).toBe(5)
    expect(state.connections.count()).toBe(7)
    expect((await crashed).message).toBe("worker crash provoked by the test")
    expect(await exited).toBe(1)
    expect(state.online.count()).toBe(2)
    expect(state.releaseWorker(1)).toEqual({ handshakes: 5, connections: 7, players: 3, sessions: 4, online: 2, locksFreed: 1 })
    expect(state.online.count()).toBe(0)
    expect(state.online.claim("00000000-0000-4000-8000-000000000001")._tag).toBe("Claimed")
    expect(state.ipTable.stats()).toEqual({ addresses: 0, storedEvents: 0, pendingTotal: 0 })
    expect(state.connections.count()).toBe(0)
    expect([0, 1, 2].map((slot) => state.players.count(slot))).toEqual([0, 0, 0])
    expect([0, 1, 2, 3].map((slot) => state.balancer.state(slot).active)).toEqual([0, 0, 0, 0])
    expect(state.balancer.lockServer(1)).toBe(true)
  })

  it("a worker waiting on a lock held by a dead worker goes on once the control thread frees it", async () => {
    const state = make(3)
    Atomics.store(int32View(state.buffers, "ipHeader"), 0, 3) // worker 2 died holding the table's lock
    const data: HammerInput = { buffers: state.buffers, index: 0, workers: 3, task: "blocked", sync: new SharedArrayBuffer(64) }
    const worker = new Worker(compiled.file("test/services/shared/hammer.worker.ts"), { workerData: data })
    const messages: Array<any> = []
    const done = new Promise<void>((resolve) => worker.on("message", (m) => (messages.push(m), m.at !== undefined && resolve())))
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(messages).toEqual([{ started: true }])
    const freedAt = Date.now()
    expect(state.releaseWorker(2)).toMatchObject({ locksFreed: 1, handshakes: 0 })
    await done
    expect(messages[1].allowed).toBe(true)
    expect(messages[1].at).toBeGreaterThanOrEqual(freedAt)
    await worker.terminate()
  })
})
