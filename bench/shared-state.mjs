// @ts-check
/**
 * Cost of the shared-state operations on one thread, for the figures in src/services/shared/SharedState.ts:
 * `npm run build && node bench/shared-state.mjs`. Not part of `npm run bench`.
 *
 * Each operation runs on addresses already in the table (the common case: the same client's next connection),
 * in rounds; the best round is reported, in nanoseconds per operation.
 */
import { createSharedState } from "../dist/services/shared/SharedState.js"

const ADDRESSES = 4096
const OPS = 1_000_000
const ROUNDS = 7

const state = createSharedState({ workers: 2 })
const table = state.ipTable
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

// Fill the table so every address has a slot (and a window with events in it).
for (const ip of ips) table.hit("login", ip, 0, 1_000_000, 60_000)
let now = 1
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
console.log(JSON.stringify(table.stats()))
