/**
 * OnlinePlayers: the UUIDs of the players a packet mode has let in, proxy-wide, so that one account is never on the
 * proxy twice (in two sessions it could carry items from one server to another, as BungeeCord and Velocity refuse).
 * A claim is a check-and-insert under one spinlock, so two threads can never both let the same UUID in.
 *
 * Structure (in the shared memory, zero meaning empty): a header (the lock, the hash seed, the count) and an
 * open-addressing table of ONLINE_SLOT_WORDS Int32 words per slot: the holder (its thread's ledger index + 1; 0 is
 * an empty slot), the 128-bit UUID, and the claim's serial number (so that only the claim itself is given back).
 * Linear probing with backward-shift deletion: no tombstones, so probe chains stay as short as the load allows. The
 * table fills to three quarters at most; past that a claim is let through uncounted (`full`), never refused.
 */
import { int32View, ONLINE_SLOT_WORDS, type SharedBuffers } from "./layout.js"
import { forceUnlock, lock, lockWithin, unlock } from "./lock.js"
import type { Release } from "./places.js"

// Header words.
const LOCK = 0 // and LOCK + 1: sleepers
const SEED = 2
const COUNT = 3
const SERIAL = 4

// Slot words.
const HOLDER = 0
const KEY = 1 // 4 words
const CLAIM = 5

/** How long the control thread waits for the lock when it gives back a dead worker's claims (ms). */
const CONTROL_WAIT_MS = 250

/** The outcome of a claim: given back with `release`; `taken` when the UUID is already on the proxy. */
export type OnlineClaim = { readonly _tag: "Claimed"; readonly release: Release } | { readonly _tag: "Taken" } | { readonly _tag: "Full" }

const TAKEN: OnlineClaim = { _tag: "Taken" }
const FULL: OnlineClaim = { _tag: "Full" }

/** The 4 words of a UUID written with or without dashes; undefined for anything else. */
export const uuidWords = (uuid: string): [number, number, number, number] | undefined => {
  const hex = uuid.replace(/-/g, "")
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) return undefined
  return [0, 8, 16, 24].map((at) => Number.parseInt(hex.slice(at, at + 8), 16) | 0) as [number, number, number, number]
}

/** Seeds the table's hash (once, on the thread that creates the state): names an attacker picks do not cluster. */
export const seedOnlinePlayers = (buffers: SharedBuffers): void => {
  Atomics.store(int32View(buffers, "onlineHeader"), SEED, (Math.random() * 0x100000000) | 0 || 1)
}

export class OnlinePlayers {
  private readonly header: Int32Array
  private readonly slots: Int32Array
  private readonly mask: number
  private readonly capacity: number
  private readonly holder: number

  constructor(buffers: SharedBuffers, worker: number) {
    this.header = int32View(buffers, "onlineHeader")
    this.slots = int32View(buffers, "onlineSlots")
    this.capacity = buffers.layout.onlineSlots
    this.mask = this.capacity - 1
    this.holder = worker + 1
  }

  /** Lets `uuid` in until the release is called, unless it is in already; a UUID that is not one is let through. */
  claim(uuid: string): OnlineClaim {
    const key = uuidWords(uuid)
    if (key === undefined) return FULL
    lock(this.header, LOCK, this.holder)
    try {
      let at = this.home(key)
      for (;;) {
        const base = at * ONLINE_SLOT_WORDS
        if (this.slots[base + HOLDER] === 0) break
        if (this.matches(base, key)) return TAKEN
        at = (at + 1) & this.mask
      }
      if (this.header[COUNT]! >= (this.capacity * 3) / 4) return FULL
      const base = at * ONLINE_SLOT_WORDS
      const serial = (this.header[SERIAL] = (this.header[SERIAL]! + 1) | 0)
      for (let i = 0; i < 4; i++) this.slots[base + KEY + i] = key[i]!
      this.slots[base + CLAIM] = serial
      this.slots[base + HOLDER] = this.holder
      this.header[COUNT]!++
      let released = false
      return {
        _tag: "Claimed",
        release: () => {
          if (released) return
          released = true
          this.giveBack(key, serial)
        }
      }
    } finally {
      unlock(this.header, LOCK)
    }
  }

  /** Players in the table, all threads together. */
  count(): number {
    return Atomics.load(this.header, COUNT)
  }

  /**
   * Gives back every claim `worker` held (it died), after freeing the lock if it held it; how many, or undefined when
   * the lock stayed taken (call again).
   */
  releaseWorker(worker: number): number | undefined {
    const dead = worker + 1
    forceUnlock(this.header, LOCK, dead)
    if (!lockWithin(this.header, LOCK, this.holder, CONTROL_WAIT_MS)) return undefined
    try {
      const keys: Array<[number, number, number, number]> = []
      for (let at = 0; at < this.capacity; at++) {
        const base = at * ONLINE_SLOT_WORDS
        if (this.slots[base + HOLDER] === dead) keys.push([1, 2, 3, 4].map((i) => this.slots[base + i]!) as [number, number, number, number])
      }
      for (const key of keys) this.remove(key, dead, undefined)
      return keys.length
    } finally {
      unlock(this.header, LOCK)
    }
  }

  private giveBack(key: ReadonlyArray<number>, serial: number): void {
    lock(this.header, LOCK, this.holder)
    try {
      this.remove(key, this.holder, serial)
    } finally {
      unlock(this.header, LOCK)
    }
  }

  /** Removes the slot of `key` held by `holder` (with `serial` when given), shifting its probe chain back. */
  private remove(key: ReadonlyArray<number>, holder: number, serial: number | undefined): void {
    let at = this.home(key)
    for (;;) {
      const base = at * ONLINE_SLOT_WORDS
      if (this.slots[base + HOLDER] === 0) return
      if (this.matches(base, key)) {
        if (this.slots[base + HOLDER] !== holder || (serial !== undefined && this.slots[base + CLAIM] !== serial)) return
        break
      }
      at = (at + 1) & this.mask
    }
    // Backward shift: each later slot of the chain that may live at the hole moves into it.
    let hole = at
    let next = at
    for (;;) {
      next = (next + 1) & this.mask
      const base = next * ONLINE_SLOT_WORDS
      if (this.slots[base + HOLDER] === 0) break
      const home = this.home([1, 2, 3, 4].map((i) => this.slots[base + i]!))
      // It stays when its home lies cyclically in (hole, next].
      const stays = hole <= next ? hole < home && home <= next : hole < home || home <= next
      if (stays) continue
      this.slots.copyWithin(hole * ONLINE_SLOT_WORDS, base, base + ONLINE_SLOT_WORDS)
      hole = next
    }
    this.slots.fill(0, hole * ONLINE_SLOT_WORDS, (hole + 1) * ONLINE_SLOT_WORDS)
    this.header[COUNT]!--
  }

  private matches(base: number, key: ReadonlyArray<number>): boolean {
    const slots = this.slots
    return slots[base + KEY] === key[0] && slots[base + KEY + 1] === key[1] && slots[base + KEY + 2] === key[2] && slots[base + KEY + 3] === key[3]
  }

  private home(key: ReadonlyArray<number>): number {
    let h = this.header[SEED]! ^ 0x9e3779b9
    for (let i = 0; i < 4; i++) {
      h = Math.imul(h ^ key[i]!, 0x85ebca6b)
      h ^= h >>> 13
    }
    h = Math.imul(h, 0xc2b2ae35)
    return (h ^ (h >>> 16)) & this.mask
  }
}
