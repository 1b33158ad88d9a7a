/**
 * Run by memory.test.ts in a fresh process (`node --expose-gc`), transpiled by compile.ts: the RSS an empty shared
 * state costs, and what 60,000 addresses with one event each add. Prints JSON.
 */
import { createSharedState } from "../../../src/services/shared/SharedState.js"

const ADDRESSES = 60_000
const gc = (globalThis as { gc?: () => void }).gc!
const rss = () => {
  gc()
  gc()
  return process.memoryUsage().rss
}

// Keys are made before the first measure, so only the table's pages are counted; the code paths are warmed on a
// throwaway state so that compiled code is not counted either.
const keys = Array.from({ length: ADDRESSES }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`)
const warm = createSharedState({ workers: 2, ipSlots: 64, ipChunks: 64 })
for (let i = 0; i < 20_000; i++) warm.ipTable.hit("login", keys[i]!, 0, 5, 10_000)

// A process that freed large blocks has raised glibc's mmap threshold (see MIN_BYTES in layout.ts): do so.
let freed: Buffer | undefined = Buffer.alloc(16 * 1024 * 1024, 1)
freed = undefined
void freed

// Twenty empty states, for the cost of one above the RSS's granularity (V8 grows its heap by 256 KiB pages).
const EMPTY = 20
const before = rss()
const states = Array.from({ length: EMPTY }, () => createSharedState({ workers: 2 }))
const empty = rss()
const state = states[0]!
for (const key of keys) state.ipTable.hit("login", key, 0, 5, 10_000)
const filled = rss()
console.log(JSON.stringify({ empty: (empty - before) / EMPTY, filled: filled - empty, stats: state.ipTable.stats() }))
