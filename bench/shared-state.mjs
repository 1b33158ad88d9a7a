// @ts-check
/**
 * Cost of the shared-state operations on one thread, for the figures in src/services/shared/SharedState.ts:
 * `npm run build && node bench/shared-state.mjs`. Not part of `npm run bench`.
 *
 * Each operation runs on addresses already in the table (the common case: the same client's next connection),
 * in rounds; the best round is reported, in nanoseconds per operation. `--threads N` then runs `hit` and
 * `enterHandshake` on N worker threads at once against one table (the lock contended), per thread.
 */
import { parseArgs } from "node:util"
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
// Loaded by a computed path so that the bench's type check does not follow it into dist/ (plain JS, no types).
const sharedStatePath = "../dist/services/shared/SharedState.js"
const { attachSharedState, createSharedState } = await import(sharedStatePath)

const ADDRESSES = 4096
const OPS = 1_000_000
const ROUNDS = 7

const ips = Array.from({ length: ADDRESSES }, (_, i) => (i % 2 === 0 ? `10.${(i >> 8) & 255}.${i & 255}.7` : `2001:db8::${i.toString(16)}`))

/** Best nanoseconds per call of `op(i)` over ROUNDS rounds of OPS calls. */
const measure = (/** @type {(i: number) => void} */ op) => {
  let best = Infinity
  for (let round = 0; round < ROUNDS; round++) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < OPS; i++) op(i)
    const ns = Number(process.hrtime.bigint() - start) / OPS
    if (ns < best) best = ns
  }
  return best
}

if (!isMainThread) {
  // A worker of `--threads`: the two table operations, on this thread's own ledger, while the others run them too.
  const { buffers, index } = workerData
  const table = attachSharedState(buffers, index).ipTable
  const hit = measure((/** @type {number} */ i) => {
    table.hit("login", ips[i % ADDRESSES], 1 + i / 1000, 8, 100)
  })
  const handshake = measure((i) => {
    const release = table.enterHandshake(ips[i % ADDRESSES], 8, 1024)
    if (release !== undefined) release()
  })
  parentPort?.postMessage({ hit, handshake })
  process.exit(0)
}

const { values } = parseArgs({ options: { threads: { type: "string", default: "0" } } })
const state = createSharedState({ workers: Math.max(2, Number(values.threads)) })
const table = state.ipTable
// Fill the table so every address has a slot (and a window with events in it).
for (const ip of ips) table.hit("login", ip, 0, 1_000_000, 60_000)
const now = 1
const rows = {
  "hit (login, allowed, window of up to 8 events)": measure((i) => {
    table.hit("login", ips[i % ADDRESSES], now + i / 1000, 8, 100)
  }),
  "hit (status, refused)": measure((i) => {
    table.hit("status", ips[i % ADDRESSES], 1, 0, 10_000)
  }),
  "enterHandshake + release": measure((i) => {
    const release = table.enterHandshake(ips[i % ADDRESSES], 8, 1024)
    if (release !== undefined) release()
  }),
  "connections.enter + release": measure(() => {
    const release = state.connections.enter(0)
    if (release !== undefined) release()
  }),
  "players.admit + release": measure((i) => {
    const release = state.players.admit(i & 15, 1000)
    if (release !== undefined) release()
  }),
  "balancer.acquire + release": measure((i) => state.balancer.acquire(i & 255)()),
  "balancer state read (active, healthy, ejectedUntil)": measure((i) => {
    const view = state.balancer.state(i & 255)
    if (view.active < 0 || !view.healthy || view.ejectedUntil > 1) throw new Error("unexpected")
  })
}
for (const [name, ns] of Object.entries(rows)) console.log(`${name.padEnd(56)} ${ns.toFixed(0).padStart(5)} ns`)

const threads = Number(values.threads)
if (threads > 0) {
  const results = await Promise.all(
    Array.from({ length: threads }, (_, index) => {
      const worker = new Worker(new URL(import.meta.url), { workerData: { buffers: state.buffers, index } })
      return new Promise((resolve, reject) => {
        worker.once("message", resolve)
        worker.once("error", reject)
      })
    })
  )
  for (const [index, result] of results.entries()) {
    const { hit, handshake } = /** @type {{ hit: number, handshake: number }} */ (result)
    console.log(`thread ${index} of ${threads}: hit ${hit.toFixed(0)} ns, enterHandshake + release ${handshake.toFixed(0)} ns`)
  }
}
