/**
 * A worker thread of the concurrency test (concurrency.test.ts): attaches to the shared state and hammers one part
 * of it, checking what it can see from inside, then posts what it counted. Transpiled by compile.ts.
 */
import { parentPort, workerData } from "node:worker_threads"
import type { BackendAddress } from "../../../src/schema/ServerConfig.js"
import { orderCandidates } from "../../../src/services/balancer/strategy.js"
import type { Release } from "../../../src/services/shared/places.js"
import { attachSharedState, type SharedBuffers } from "../../../src/services/shared/SharedState.js"

export interface HammerInput {
  readonly buffers: SharedBuffers
  readonly index: number
  readonly workers: number
  readonly task: "rate" | "handshakes" | "connections" | "players" | "balancer" | "online" | "crash" | "blocked"
  /** Int32 words for barriers and shared observations. */
  readonly sync: SharedArrayBuffer
}

const input = workerData as HammerInput
const state = attachSharedState(input.buffers, input.index)
const sync = new Int32Array(input.sync)
const OPS = 50_000

/** Waits until every worker reached barrier `round` (sync[0] counts arrivals). */
const barrier = (round: number) => {
  Atomics.add(sync, 0, 1)
  while (Atomics.load(sync, 0) < input.workers * round) Atomics.wait(sync, 0, Atomics.load(sync, 0), 5)
  Atomics.notify(sync, 0)
}

/** Releases the oldest of `held` once it holds `size`, keeping at most `size` places. */
const keep = (held: Array<Release>, release: Release, size: number) => {
  held.push(release)
  if (held.length > size) held.shift()!()
}

const post = (result: unknown) => parentPort!.postMessage(result)

const uuidOf = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`

const v4 = (n: number) => `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`

switch (input.task) {
  case "rate": {
    // 500 addresses, three windows one after the other; odd workers spell the same addresses as IPv4-mapped IPv6.
    const ADDRESSES = 500
    const LIMIT = 20
    const WINDOW = 60_000
    const allowed = Array.from({ length: 3 }, () => new Array<number>(ADDRESSES).fill(0))
    for (let phase = 0; phase < 3; phase++) {
      barrier(phase + 1)
      const now = 1_000_000 + phase * WINDOW
      for (let i = 0; i < OPS / 3; i++) {
        const n = (i * 7 + input.index * 13) % ADDRESSES
        const ip = input.index % 2 === 0 ? v4(n) : `::ffff:${v4(n)}`
        if (state.ipTable.hit(n % 5 === 0 ? "status" : "login", ip, now, LIMIT, WINDOW)) allowed[phase]![n]! += 1
      }
    }
    post({ allowed })
    break
  }
  case "handshakes": {
    // Handshakes from 16 addresses (2 per address, 40 in all at most; each thread holds up to 25) while pings from
    // 5,000 addresses churn a table of 1,024 slots and chunks: eviction runs all the time around the pinned slots.
    const PER_IP = 2
    const TOTAL = 40
    const held: Array<Release> = []
    let taken = 0
    let refused = 0
    let violations = 0
    for (let i = 0; i < OPS; i++) {
      const ip = `2001:db8::${((i * 5 + input.index) % 16).toString(16)}`
      const hold = state.ipTable.enterHandshake(ip, PER_IP, TOTAL)
      if (hold === undefined) {
        refused += 1
        // Give one place back, so that the threads together never hold every place and stall: progress must not
        // depend on how the threads happen to be scheduled.
        held.shift()?.()
      } else {
        taken += 1
        if (state.ipTable.stats().pendingTotal > TOTAL || (state.ipTable.lookup(ip)?.pending ?? 0) > PER_IP) violations += 1
        keep(held, () => hold.release(), 25)
      }
      state.ipTable.hit("status", v4((i * 31 + input.index * 1000) % 5000), i, 3, 1000)
    }
    for (const release of held.splice(0)) {
      release()
      release()
    }
    post({ taken, refused, violations })
    break
  }
  case "connections": {
    // Phase 1: enter and release, at most 10 at once; `inside` (sync[1]) counts holders seen from outside.
    const MAX = 10
    const held: Array<Release> = []
    let taken = 0
    let violations = 0
    for (let i = 0; i < OPS; i++) {
      const release = state.connections.enter(MAX)
      if (release === undefined) {
        held.shift()?.() // as for handshakes: four threads holding three each could otherwise hold all ten
        continue
      }
      taken += 1
      if (Atomics.add(sync, 1, 1) + 1 > MAX || state.connections.count() > MAX) violations += 1
      keep(held, () => (Atomics.sub(sync, 1, 1), release()), 3)
    }
    for (const release of held.splice(0)) release()
    barrier(1)
    // Phase 2: nobody releases: exactly 1,000 places are taken in all.
    let kept = 0
    for (let i = 0; i < OPS / 5; i++) if (state.connections.enter(1000) !== undefined) kept += 1
    post({ taken, violations, kept })
    break
  }
  case "players": {
    // Eight servers of at most 5 players: phase 1 admits and releases, phase 2 keeps everything.
    const MAX = 5
    const held: Array<Release> = []
    let violations = 0
    for (let i = 0; i < OPS; i++) {
      const slot = (i + input.index) % 8
      const release = state.players.admit(slot, MAX)
      if (release === undefined) continue
      if (state.players.count(slot) > MAX) violations += 1
      keep(held, release, 6)
    }
    for (const release of held.splice(0)) release()
    barrier(1)
    const kept = new Array<number>(8).fill(0)
    for (let i = 0; i < OPS / 5; i++) {
      const slot = (i * 3 + input.index) % 8
      if (state.players.admit(slot, MAX) !== undefined) kept[slot]! += 1
    }
    post({ violations, kept })
    break
  }
  case "balancer": {
    // least_conn counts on 16 addresses, then smooth round robin 3:2:1 on server 0 under its lock.
    const held: Array<Release> = []
    for (let i = 0; i < OPS; i++) keep(held, state.balancer.acquire((i + input.index) % 16), 8)
    for (const release of held.splice(0)) release()
    let acquiredKept = 0
    for (let i = 0; i < 1000; i++, acquiredKept++) state.balancer.acquire(16 + (i % 4))
    barrier(1)
    const addresses = [3, 2, 1].map((weight, i) => ({ host: "127.0.0.1", port: i, weight }) as BackendAddress)
    const picks = [0, 0, 0]
    const counter = state.balancer.pickCounter(0)
    for (let i = 0; i < 10_002; i++) {
      state.balancer.lockServer(0)
      try {
        const candidates = addresses.map((address, at) => ({ address, state: state.balancer.state(at) }))
        picks[orderCandidates("round_robin", candidates, 0, undefined, counter)[0]!.address.port]! += 1
      } finally {
        state.balancer.unlockServer(0)
      }
    }
    post({ acquiredKept, picks })
    break
  }
  case "online": {
    // 16 UUIDs claimed from every thread at once, each thread holding 2 (never one it holds: 7 steps through all 16),
    // so the threads meet on them all the time: `sync[1 + n]` counts the threads that think they hold UUID n, and a
    // second holder at any moment is seen by whichever thread makes it two.
    const held: Array<{ n: number; release: Release }> = []
    let claimed = 0
    let taken = 0
    let violations = 0
    barrier(1)
    for (let i = 0; i < OPS; i++) {
      const n = (i * 7 + input.index * 13) % 16
      const claim = state.online.claim(uuidOf(n))
      if (claim._tag === "Taken") taken += 1
      else if (claim._tag !== "Claimed") throw new Error(`claim of ${n}: ${claim._tag}`)
      else {
        claimed += 1
        if (Atomics.add(sync, 1 + n, 1) !== 0) violations += 1
        held.push({ n, release: claim.release })
      }
      // Every attempt lets the oldest of 3 go, taken or not, so that the threads never all wait on each other.
      if (held.length >= 3) {
        const oldest = held.shift()!
        Atomics.sub(sync, 1 + oldest.n, 1)
        oldest.release()
      }
    }
    for (const { n, release } of held.splice(0)) {
      Atomics.sub(sync, 1 + n, 1)
      release()
    }
    post({ claimed, taken, violations })
    break
  }
  case "crash": {
    // Takes a bit of everything, says so, then dies by an uncaught exception.
    for (let i = 0; i < 5; i++) state.ipTable.enterHandshake(v4(i), 8, 1024)
    for (let i = 0; i < 7; i++) state.connections.enter(0)
    for (let i = 0; i < 3; i++) state.players.admit(i, 0)
    for (let i = 0; i < 4; i++) state.balancer.acquire(i)
    for (let i = 0; i < 2; i++) state.online.claim(uuidOf(i))
    state.balancer.lockServer(1)
    post({ holding: true })
    setTimeout(() => {
      throw new Error("worker crash provoked by the test")
    }, 10)
    break
  }
  case "blocked": {
    // The table's lock is held by a worker that died: this waits until the control thread frees it.
    post({ started: true })
    const allowed = state.ipTable.hit("login", "10.9.9.9", 0, 1, 1000)
    post({ allowed, at: Date.now() })
    break
  }
}
