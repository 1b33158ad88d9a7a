/**
 * IpTable: per client address, in shared memory, the exact sliding windows of `[rate_limit]` (logins and status
 * pings) and the handshakes in progress, read and written by every thread under one spinlock.
 *
 * Semantics are SlidingWindowLimiter's (RateLimiter.ts): an event is allowed when fewer than `limit` allowed events
 * happened in the `windowMs` before it; refused events are not stored; times ahead of now (a wall clock stepped back)
 * count as now. Handshakes in progress are bounded per address and in total, the bounds given per call.
 *
 * Structure (all in SharedArrayBuffers, zero meaning empty, nothing initialised up front):
 * - slots of IP_SLOT_WORDS Int32 words: the 128-bit key, the hash chain link, the LRU links, the handshakes in
 *   progress, flags, and per window its first and last chunk and `count * 8 + start` (start: where the oldest time
 *   is in the first chunk). Slots come from a bump allocator, then a free list (linked through the chain word);
 * - open hashing: a power-of-two array of buckets, each the first slot of its chain, keyed by a seeded hash;
 * - times in chunks of CHUNK_TIMES Float64 (oldest first), linked by a parallel Int32 array, from a bump allocator
 *   then a free list; a window with no event holds no chunk;
 * - an LRU list of the slots with no handshake in progress (a slot with one is unlinked, so it is never evicted nor
 *   reused): when slots or chunks run out the least recently seen address is forgotten, never the one being counted;
 * - a ledger per thread: the slot of each handshake it holds, at positions from a thread-local free list, so that
 *   `releaseWorker` gives back what a dead worker held.
 */
import { CHUNK_TIMES, float64View, int32View, IP_SLOT_WORDS, type SharedBuffers } from "./layout.js"
import { addressKey } from "./ipKey.js"
import { forceUnlock as forceUnlockWord, lock, lockWithin, unlock } from "./lock.js"

export type RateKind = "login" | "status"

export interface IpTableStats {
  /** Addresses tracked. */
  readonly addresses: number
  /** Event times stored, all addresses and both windows together. */
  readonly storedEvents: number
  /** Handshakes in progress, all addresses together. */
  readonly pendingTotal: number
}

/** What the table holds for one address (events stored, expired or not). */
export interface AddressEntry {
  readonly pending: number
  readonly logins: number
  readonly statuses: number
}

// Header words.
const LOCK = 0 // and LOCK + 1: sleepers
const SEED = 2
const SLOT_BUMP = 3
const SLOT_FREE = 4
const CHUNK_BUMP = 5
const CHUNK_FREE = 6
const LRU_HEAD = 7
const LRU_TAIL = 8
const ADDRESSES = 9
const STORED = 10
const PENDING_TOTAL = 11
const SWEEP_CURSOR = 12

// Slot words.
// Words 0..3: the key, most significant first.
const CHAIN = 4
const LRU_PREV = 5
const LRU_NEXT = 6
const PENDING = 7
const FLAGS = 8
const LOGIN = 9 // window: FIRST, LAST, COUNT_START
const STATUS = 12
const FIRST = 0
const LAST = 1
const COUNT_START = 2

const IN_USE = 1
const IN_LRU = 2

/** How long the control thread waits for the lock before giving up on a sweep or a release (ms). */
const CONTROL_WAIT_MS = 250
/** Slots a sweep examines per hold of the lock, so that workers never wait long behind it. */
const SWEEP_BATCH = 256

/** Seeds the table's hash (once, on the thread that creates the state): keys an attacker picks do not collide. */
export const seedIpTable = (buffers: SharedBuffers): void => {
  const header = int32View(buffers, "ipHeader")
  Atomics.store(header, SEED, (Math.random() * 0x100000000) | 0 || 1)
}

/**
 * A handshake place this thread holds, at a position of its ledger: given back once with `release`, or passed on to
 * another address with `IpTable.handOver`.
 */
export class HandshakeHold {
  /** Given back, or passed on: either way no longer this hold's. */
  ended = false

  constructor(
    private readonly leave: (position: number) => void,
    readonly position: number
  ) {}

  /** Gives the place back; again, or after it was passed on, does nothing. */
  release(): void {
    if (this.ended) return
    this.ended = true
    this.leave(this.position)
  }
}

export class IpTable {
  /**
   * Why this thread's last `enterHandshake` was refused: "full" when every place was taken (or this thread's ledger
   * was full), "address" for the address's own bound (or a table with no room for it).
   */
  lastRefusal: "full" | "address" = "full"
  private readonly header: Int32Array
  private readonly slots: Int32Array
  private readonly buckets: Int32Array
  private readonly times: Float64Array
  private readonly chunkNext: Int32Array
  private readonly ledger: Int32Array
  private readonly slotCapacity: number
  private readonly chunkCapacity: number
  private readonly bucketMask: number
  private readonly holder: number
  /** The control thread never waits for ever on the lock: it is the one that frees a dead worker's. */
  private readonly control: boolean
  private readonly seed: number
  /** This thread's ledger region: [ledgerBase, ledgerBase + ledgerSize). */
  private readonly ledgerBase: number
  private readonly ledgerSize: number
  private readonly handshakesPerLedger: number
  /** Thread-local: ledger positions never used yet start at ledgerBump; released ones are stacked in ledgerFree. */
  private ledgerBump = 0
  private readonly ledgerFree: Int32Array
  private ledgerFreeTop = 0
  /** Thread-local scratch for the key being looked up. */
  private readonly key = new Int32Array(4)
  /** What a hold calls to give its place back. */
  private readonly leaveAt: (position: number) => void

  constructor(buffers: SharedBuffers, worker: number) {
    const { layout } = buffers
    this.header = int32View(buffers, "ipHeader")
    this.slots = int32View(buffers, "ipSlots")
    this.buckets = int32View(buffers, "ipBuckets")
    this.times = float64View(buffers, "ipTimes")
    this.chunkNext = int32View(buffers, "ipChunkNext")
    this.ledger = int32View(buffers, "ipLedger")
    this.slotCapacity = layout.ipSlots
    this.chunkCapacity = layout.ipChunks
    this.bucketMask = layout.ipBuckets - 1
    this.holder = worker + 1
    this.control = worker === layout.workers
    this.seed = Atomics.load(this.header, SEED)
    this.handshakesPerLedger = layout.handshakesPerWorker
    this.ledgerBase = worker * layout.handshakesPerWorker
    this.ledgerSize = layout.handshakesPerWorker
    this.ledgerFree = new Int32Array(layout.handshakesPerWorker)
    this.leaveAt = (position) => this.leave(position)
  }

  /**
   * Counts an event of `kind` from `ip` at `nowMs`: true when fewer than `limit` allowed events of that kind
   * happened in the `windowMs` before it (and stores it), false otherwise (stores nothing).
   */
  hit(kind: RateKind, ip: string, nowMs: number, limit: number, windowMs: number): boolean {
    const bucket = this.keyOf(ip)
    lock(this.header, LOCK, this.holder)
    try {
      let slot = this.find(bucket)
      if (slot === 0) {
        if (limit <= 0) return false
        slot = this.insert(bucket)
        if (slot === 0) return false
      } else {
        this.touch(slot)
      }
      const window = slot * IP_SLOT_WORDS + (kind === "login" ? LOGIN : STATUS)
      this.expire(window, nowMs, windowMs)
      const allowed = this.slots[window + COUNT_START]! >>> 3 < limit && this.append(slot, window, nowMs)
      if (!allowed) this.forgetIfIdle(slot)
      return allowed
    } finally {
      unlock(this.header, LOCK)
    }
  }

  /**
   * Takes a handshake place for `ip` until the hold is released: undefined when the address has `perIp` in progress,
   * the proxy `total`, or this thread's ledger is full (`lastRefusal` says which).
   */
  enterHandshake(ip: string, perIp: number, total: number): HandshakeHold | undefined {
    const bucket = this.keyOf(ip)
    const header = this.header
    let position: number
    lock(header, LOCK, this.holder)
    try {
      // The address's own bound first: an address at its bound is refused whether or not places are free.
      this.lastRefusal = "address"
      const found = this.find(bucket)
      if (this.atOwnBound(found, perIp)) return undefined
      this.lastRefusal = "full"
      if (header[PENDING_TOTAL]! >= total || (this.ledgerFreeTop === 0 && this.ledgerBump === this.ledgerSize)) return undefined
      this.lastRefusal = "address"
      const slot = this.pendingSlot(found, bucket, perIp)
      if (slot === 0) return undefined
      header[PENDING_TOTAL]! += 1
      position = this.ledgerFreeTop > 0 ? this.ledgerFree[--this.ledgerFreeTop]! : this.ledgerBump++
      this.ledger[this.ledgerBase + position] = slot
    } finally {
      unlock(header, LOCK)
    }
    return new HandshakeHold(this.leaveAt, position)
  }

  /**
   * Passes a place this thread holds to `ip`, in one hold of the lock: the total stays as it was, and no other thread
   * can take the place in between (as it could if `from` were released and `ip` then entered). The new hold, and
   * `from` ended; undefined when `ip` has `perIp` in progress or the table has no room for it, or `from` has ended
   * (it then stays as it was).
   */
  handOver(from: HandshakeHold, ip: string, perIp: number): HandshakeHold | undefined {
    if (from.ended) return undefined
    const bucket = this.keyOf(ip)
    const at = this.ledgerBase + from.position
    lock(this.header, LOCK, this.holder)
    try {
      const previous = this.ledger[at]!
      // 0 when releaseWorker gave the place back already: there is nothing to pass on.
      if (previous === 0) return undefined
      const found = this.find(bucket)
      if (this.atOwnBound(found, perIp)) return undefined
      // The previous address still has a handshake in progress here, so finding room for the new one never forgets it.
      const slot = this.pendingSlot(found, bucket, perIp)
      if (slot === 0) return undefined
      this.ledger[at] = slot
      // The total is unchanged: one place changes address.
      this.dropAddressPending(previous)
    } finally {
      unlock(this.header, LOCK)
    }
    from.ended = true
    return new HandshakeHold(this.leaveAt, from.position)
  }

  /** Whether the address at `found` (0: not in the table) has `perIp` handshakes in progress. Under the lock. */
  private atOwnBound(found: number, perIp: number): boolean {
    return found !== 0 && this.slots[found * IP_SLOT_WORDS + PENDING]! >= perIp
  }

  /**
   * The slot of the address at `bucket` (`found`, or a new one) with one more handshake in progress, out of the LRU
   * list; 0 when the table has no room for it. Under the lock.
   */
  private pendingSlot(found: number, bucket: number, perIp: number): number {
    let slot = found
    if (slot === 0) {
      if (perIp <= 0) return 0
      slot = this.insert(bucket)
      if (slot === 0) return 0
    }
    const base = slot * IP_SLOT_WORDS
    if (this.slots[base + PENDING]! === 0 && (this.slots[base + FLAGS]! & IN_LRU) !== 0) this.unlinkLru(slot)
    this.slots[base + PENDING]! += 1
    return slot
  }

  /**
   * Forgets addresses with no event left in their windows and no handshake in progress, and drops expired times,
   * examining at most `budget` slots from where the last sweep stopped (the control thread calls this periodically).
   * How many addresses it forgot; undefined when the table stayed locked (by a worker that died holding it?).
   */
  sweep(nowMs: number, loginWindowMs: number, statusWindowMs: number, budget: number): number | undefined {
    const header = this.header
    const slots = this.slots
    if (!lockWithin(header, LOCK, this.holder, CONTROL_WAIT_MS)) return undefined
    let forgotten = 0
    try {
      let cursor = header[SWEEP_CURSOR]!
      const steps = Math.min(budget, header[SLOT_BUMP]!)
      for (let step = 0; step < steps; step++) {
        cursor = cursor >= header[SLOT_BUMP]! ? 1 : cursor + 1
        const base = cursor * IP_SLOT_WORDS
        if ((slots[base + FLAGS]! & IN_USE) !== 0) {
          this.expire(base + LOGIN, nowMs, loginWindowMs)
          this.expire(base + STATUS, nowMs, statusWindowMs)
          if (this.forgetIfIdle(cursor)) forgotten += 1
        }
        if ((step + 1) % SWEEP_BATCH === 0 && step + 1 < steps) {
          header[SWEEP_CURSOR] = cursor
          unlock(header, LOCK)
          if (!lockWithin(header, LOCK, this.holder, CONTROL_WAIT_MS)) return forgotten
        }
      }
      header[SWEEP_CURSOR] = cursor
    } finally {
      if (Atomics.load(header, LOCK) === this.holder) unlock(header, LOCK)
    }
    return forgotten
  }

  /** Counts, read without the lock (each is exact; together they may be a moment apart). */
  stats(): IpTableStats {
    return {
      addresses: Atomics.load(this.header, ADDRESSES),
      storedEvents: Atomics.load(this.header, STORED),
      pendingTotal: Atomics.load(this.header, PENDING_TOTAL)
    }
  }

  /**
   * What the table holds for `ip` (diagnostics and tests), or undefined when it does not track it (or, on the control
   * thread, when the table stayed locked).
   */
  lookup(ip: string): AddressEntry | undefined {
    const bucket = this.keyOf(ip)
    if (!this.control) lock(this.header, LOCK, this.holder)
    else if (!lockWithin(this.header, LOCK, this.holder, CONTROL_WAIT_MS)) return undefined
    try {
      const slot = this.find(bucket)
      if (slot === 0) return undefined
      const base = slot * IP_SLOT_WORDS
      return {
        pending: this.slots[base + PENDING]!,
        logins: this.slots[base + LOGIN + COUNT_START]! >>> 3,
        statuses: this.slots[base + STATUS + COUNT_START]! >>> 3
      }
    } finally {
      unlock(this.header, LOCK)
    }
  }

  /**
   * Gives back every handshake `worker`'s ledger holds (control thread, once that worker has died, before a
   * replacement takes its index), freeing the lock first if the worker died holding it. How many it gave back;
   * undefined when the table stayed locked (call again).
   */
  releaseWorker(worker: number): number | undefined {
    this.forceUnlock(worker)
    if (!lockWithin(this.header, LOCK, this.holder, CONTROL_WAIT_MS)) return undefined
    let released = 0
    try {
      const from = worker * this.handshakesPerLedger
      for (let at = from; at < from + this.handshakesPerLedger; at++) {
        const slot = this.ledger[at]!
        if (slot === 0) continue
        this.ledger[at] = 0
        this.dropPending(slot)
        released += 1
      }
    } finally {
      unlock(this.header, LOCK)
    }
    return released
  }

  /** Frees the table's lock if `worker` holds it (it died inside a critical section); whether it did. */
  forceUnlock(worker: number): boolean {
    return forceUnlockWord(this.header, LOCK, worker + 1)
  }

  // ---- inside the lock -------------------------------------------------------------------------------------------

  /** Parses `ip` into the scratch key and returns its bucket. */
  private keyOf(ip: string): number {
    const key = this.key
    addressKey(ip, key)
    return this.bucketOf(key[0]!, key[1]!, key[2]!, key[3]!)
  }

  /** The bucket of a key: a seeded mix of its four words. */
  private bucketOf(k0: number, k1: number, k2: number, k3: number): number {
    let h = this.seed ^ k0
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) ^ k1
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) ^ k2
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) ^ k3
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
    return (h ^ (h >>> 16)) & this.bucketMask
  }

  /** The slot of the scratch key in `bucket`'s chain, or 0. */
  private find(bucket: number): number {
    const slots = this.slots
    const key = this.key
    let slot = this.buckets[bucket]!
    while (slot !== 0) {
      const base = slot * IP_SLOT_WORDS
      if (slots[base]! === key[0] && slots[base + 1]! === key[1] && slots[base + 2]! === key[2] && slots[base + 3]! === key[3]) {
        return slot
      }
      slot = slots[base + CHAIN]!
    }
    return 0
  }

  /** A slot for the scratch key, chained in `bucket` and most recent in the LRU list; 0 when none can be had. */
  private insert(bucket: number): number {
    const slot = this.allocateSlot()
    if (slot === 0) return 0
    const slots = this.slots
    const base = slot * IP_SLOT_WORDS
    slots[base] = this.key[0]!
    slots[base + 1] = this.key[1]!
    slots[base + 2] = this.key[2]!
    slots[base + 3] = this.key[3]!
    slots[base + FLAGS] = IN_USE
    slots[base + CHAIN] = this.buckets[bucket]!
    this.buckets[bucket] = slot
    this.linkLru(slot)
    Atomics.store(this.header, ADDRESSES, this.header[ADDRESSES]! + 1)
    return slot
  }

  private allocateSlot(): number {
    const header = this.header
    const free = header[SLOT_FREE]!
    if (free !== 0) {
      header[SLOT_FREE] = this.slots[free * IP_SLOT_WORDS + CHAIN]!
      this.slots[free * IP_SLOT_WORDS + CHAIN] = 0
      return free
    }
    if (header[SLOT_BUMP]! < this.slotCapacity) return ++header[SLOT_BUMP]!
    // Full: forget the least recently seen address (the one being counted is not in the table yet).
    const victim = header[LRU_HEAD]!
    if (victim === 0) return 0
    this.forget(victim)
    return this.allocateSlot()
  }

  /** A chunk for `current`'s next time; evicts other addresses when none is free; 0 when none can be had. */
  private allocateChunk(current: number): number {
    const header = this.header
    for (;;) {
      const free = header[CHUNK_FREE]!
      if (free !== 0) {
        header[CHUNK_FREE] = this.chunkNext[free]!
        this.chunkNext[free] = 0
        return free
      }
      if (header[CHUNK_BUMP]! < this.chunkCapacity) return ++header[CHUNK_BUMP]!
      // `current` was just made most recent (or has handshakes in progress and is not in the list at all).
      const victim = header[LRU_HEAD]!
      if (victim === 0 || victim === current) return 0
      this.forget(victim)
    }
  }

  /** Drops the times of `window` at least `windowMs` old (after bringing times ahead of `nowMs` back to it). */
  private expire(window: number, nowMs: number, windowMs: number): void {
    const slots = this.slots
    const times = this.times
    const countStart = slots[window + COUNT_START]!
    let count = countStart >>> 3
    if (count === 0) return
    let start = countStart & 7
    let first = slots[window + FIRST]!
    const last = slots[window + LAST]!
    // Times are in order: only the newest can be ahead of now, unless the clock was stepped back.
    if (times[last * CHUNK_TIMES + ((start + count - 1) & 7)]! > nowMs) this.clamp(first, start, count, nowMs)
    let dropped = 0
    while (count > 0 && nowMs - times[first * CHUNK_TIMES + start]! >= windowMs) {
      count -= 1
      dropped += 1
      start += 1
      if (start === CHUNK_TIMES) {
        const next = this.chunkNext[first]!
        this.freeChunks(first, first)
        first = next
        start = 0
      }
    }
    if (dropped === 0) return
    if (count === 0) {
      if (first !== 0) this.freeChunks(first, first)
      slots[window + FIRST] = 0
      slots[window + LAST] = 0
      slots[window + COUNT_START] = 0
    } else {
      slots[window + FIRST] = first
      slots[window + COUNT_START] = (count << 3) | start
    }
    Atomics.store(this.header, STORED, this.header[STORED]! - dropped)
  }

  /** Brings every time of a window that is ahead of `nowMs` back to it (a wall clock stepped back). */
  private clamp(first: number, start: number, count: number, nowMs: number): void {
    const times = this.times
    let chunk = first
    let at = start
    for (let i = 0; i < count; i++) {
      const index = chunk * CHUNK_TIMES + at
      if (times[index]! > nowMs) times[index] = nowMs
      at += 1
      if (at === CHUNK_TIMES) {
        chunk = this.chunkNext[chunk]!
        at = 0
      }
    }
  }

  /** Stores `nowMs` as the newest time of `window`; false when no chunk could be had. */
  private append(slot: number, window: number, nowMs: number): boolean {
    const slots = this.slots
    const countStart = slots[window + COUNT_START]!
    const count = countStart >>> 3
    const next = (countStart & 7) + count
    if (count === 0 || (next & 7) === 0) {
      const chunk = this.allocateChunk(slot)
      if (chunk === 0) return false
      if (count === 0) slots[window + FIRST] = chunk
      else this.chunkNext[slots[window + LAST]!] = chunk
      slots[window + LAST] = chunk
      this.times[chunk * CHUNK_TIMES] = nowMs
    } else {
      this.times[slots[window + LAST]! * CHUNK_TIMES + (next & 7)] = nowMs
    }
    slots[window + COUNT_START] = countStart + 8
    Atomics.store(this.header, STORED, this.header[STORED]! + 1)
    return true
  }

  /** Gives back a handshake place taken at ledger `position` of this thread. */
  private leave(position: number): void {
    lock(this.header, LOCK, this.holder)
    try {
      const at = this.ledgerBase + position
      const slot = this.ledger[at]!
      // 0 when releaseWorker already gave it back.
      if (slot !== 0) {
        this.ledger[at] = 0
        this.dropPending(slot)
      }
    } finally {
      unlock(this.header, LOCK)
    }
    this.ledgerFree[this.ledgerFreeTop++] = position
  }

  /** One handshake of `slot` ended: one place fewer in total, and one fewer for its address. */
  private dropPending(slot: number): void {
    Atomics.store(this.header, PENDING_TOTAL, this.header[PENDING_TOTAL]! - 1)
    this.dropAddressPending(slot)
  }

  /** One handshake fewer for `slot`'s address: the last one puts it back in the LRU list (or forgets it if idle). */
  private dropAddressPending(slot: number): void {
    const base = slot * IP_SLOT_WORDS
    const left = this.slots[base + PENDING]! - 1
    this.slots[base + PENDING] = left
    if (left === 0 && !this.forgetIfIdle(slot)) this.linkLru(slot)
  }

  /** Forgets `slot` when it holds no event and no handshake; whether it did. */
  private forgetIfIdle(slot: number): boolean {
    const base = slot * IP_SLOT_WORDS
    const slots = this.slots
    if (slots[base + PENDING]! !== 0 || slots[base + LOGIN + COUNT_START]! !== 0 || slots[base + STATUS + COUNT_START]! !== 0) {
      return false
    }
    this.forget(slot)
    return true
  }

  /** Removes `slot` from the table (its chain, the LRU list), frees its chunks and puts it on the free list. */
  private forget(slot: number): void {
    const slots = this.slots
    const base = slot * IP_SLOT_WORDS
    const dropped = this.freeWindow(base + LOGIN) + this.freeWindow(base + STATUS)
    if (dropped > 0) Atomics.store(this.header, STORED, this.header[STORED]! - dropped)
    // Unchain: find the link that points at the slot. (The scratch key is left alone: it may be the one being added.)
    const bucket = this.bucketOf(slots[base]!, slots[base + 1]!, slots[base + 2]!, slots[base + 3]!)
    let previous = 0
    let at = this.buckets[bucket]!
    while (at !== slot && at !== 0) {
      previous = at
      at = slots[at * IP_SLOT_WORDS + CHAIN]!
    }
    if (previous === 0) this.buckets[bucket] = slots[base + CHAIN]!
    else slots[previous * IP_SLOT_WORDS + CHAIN] = slots[base + CHAIN]!
    if ((slots[base + FLAGS]! & IN_LRU) !== 0) this.unlinkLru(slot)
    slots.fill(0, base, base + IP_SLOT_WORDS)
    slots[base + CHAIN] = this.header[SLOT_FREE]!
    this.header[SLOT_FREE] = slot
    Atomics.store(this.header, ADDRESSES, this.header[ADDRESSES]! - 1)
  }

  /** Frees the chunks of a window (its words are cleared by the caller); how many times it held. */
  private freeWindow(window: number): number {
    const count = this.slots[window + COUNT_START]! >>> 3
    if (count > 0) this.freeChunks(this.slots[window + FIRST]!, this.slots[window + LAST]!)
    return count
  }

  /** Puts the chain first..last (linked by chunkNext) on the chunk free list at once. */
  private freeChunks(first: number, last: number): void {
    this.chunkNext[last] = this.header[CHUNK_FREE]!
    this.header[CHUNK_FREE] = first
  }

  private linkLru(slot: number): void {
    const slots = this.slots
    const base = slot * IP_SLOT_WORDS
    const tail = this.header[LRU_TAIL]!
    slots[base + LRU_PREV] = tail
    slots[base + LRU_NEXT] = 0
    if (tail === 0) this.header[LRU_HEAD] = slot
    else slots[tail * IP_SLOT_WORDS + LRU_NEXT] = slot
    this.header[LRU_TAIL] = slot
    slots[base + FLAGS] = slots[base + FLAGS]! | IN_LRU
  }

  private unlinkLru(slot: number): void {
    const slots = this.slots
    const base = slot * IP_SLOT_WORDS
    const prev = slots[base + LRU_PREV]!
    const next = slots[base + LRU_NEXT]!
    if (prev === 0) this.header[LRU_HEAD] = next
    else slots[prev * IP_SLOT_WORDS + LRU_NEXT] = next
    if (next === 0) this.header[LRU_TAIL] = prev
    else slots[next * IP_SLOT_WORDS + LRU_PREV] = prev
    slots[base + LRU_PREV] = 0
    slots[base + LRU_NEXT] = 0
    slots[base + FLAGS] = slots[base + FLAGS]! & ~IN_LRU
  }

  /** Makes `slot` the most recently seen (no-op for a slot with handshakes in progress, which is not in the list). */
  private touch(slot: number): void {
    if ((this.slots[slot * IP_SLOT_WORDS + FLAGS]! & IN_LRU) === 0 || this.header[LRU_TAIL] === slot) return
    this.unlinkLru(slot)
    this.linkLru(slot)
  }
}
