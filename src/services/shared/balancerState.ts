/**
 * The balancer's per-address state in shared memory, so that every worker orders a server's addresses from the same
 * least_conn counts, round robin weights, ejections, health verdicts and slow-start ramps.
 *
 * `state(slot)` is an AddressState (balancer/strategy.ts) whose fields are getters and setters over the shared
 * arrays: one view object per slot, made once per thread and cached, so ordering a login allocates nothing. Single
 * fields are read and written whole; read-modify-writes across fields or threads (orderCandidates' round robin
 * weights and pick order, `failures += 1`) belong under the server's lock (`lockServer` / `unlockServer`).
 * least_conn counts go through `acquire`, a counted place with a ledger per thread (places.ts).
 */
import type { AddressState } from "../balancer/strategy.js"
import {
  BALANCER_FLOAT_WORDS,
  BALANCER_INT_WORDS,
  balancerLayout,
  float64View,
  int32View,
  SERVER_LOCK_WORDS,
  type SharedBuffers
} from "./layout.js"
import { forceUnlock, holderOf, lock, lockWithin, unlock } from "./lock.js"
import { countOf, COUNT_BITS, COUNT_MASK, giveBack, record, releaseLedger, type Release, resetLedger, resetPlaces, take } from "./places.js"

// Int32 words per address.
const ACTIVE = 0
const FAILURES = 1
const FLAGS = 2
// Float64 values per address.
const CURRENT_WEIGHT = 0
const EJECTED_UNTIL = 1
const RECOVERED_AT = 2
const LAST_PICKED = 3

/** Zero flags are a fresh address: healthy, never recovered. */
const UNHEALTHY = 1
const HAS_RECOVERED_AT = 2

/** How long the control thread waits for a server's lock (ms). */
const CONTROL_WAIT_MS = 250

/** One address's state as an AddressState over the shared arrays. */
class SharedAddressState implements AddressState {
  constructor(
    private readonly ints: Int32Array,
    private readonly floats: Float64Array,
    private readonly i: number,
    private readonly f: number
  ) {}

  get active(): number {
    return countOf(Atomics.load(this.ints, this.i + ACTIVE))
  }
  /** Sets the count keeping its generation; the connection path counts through `acquire` instead. */
  set active(value: number) {
    const word = Atomics.load(this.ints, this.i + ACTIVE)
    Atomics.store(this.ints, this.i + ACTIVE, ((word >>> COUNT_BITS) << COUNT_BITS) | Math.min(COUNT_MASK, Math.max(0, value)))
  }
  get currentWeight(): number {
    return this.floats[this.f + CURRENT_WEIGHT]!
  }
  set currentWeight(value: number) {
    this.floats[this.f + CURRENT_WEIGHT] = value
  }
  get failures(): number {
    return Atomics.load(this.ints, this.i + FAILURES)
  }
  set failures(value: number) {
    Atomics.store(this.ints, this.i + FAILURES, value)
  }
  get ejectedUntil(): number {
    return this.floats[this.f + EJECTED_UNTIL]!
  }
  set ejectedUntil(value: number) {
    this.floats[this.f + EJECTED_UNTIL] = value
  }
  get recoveredAt(): number | undefined {
    return (Atomics.load(this.ints, this.i + FLAGS) & HAS_RECOVERED_AT) === 0 ? undefined : this.floats[this.f + RECOVERED_AT]!
  }
  set recoveredAt(value: number | undefined) {
    if (value === undefined) {
      Atomics.and(this.ints, this.i + FLAGS, ~HAS_RECOVERED_AT)
    } else {
      this.floats[this.f + RECOVERED_AT] = value
      Atomics.or(this.ints, this.i + FLAGS, HAS_RECOVERED_AT)
    }
  }
  get healthy(): boolean {
    return (Atomics.load(this.ints, this.i + FLAGS) & UNHEALTHY) === 0
  }
  set healthy(value: boolean) {
    if (value) Atomics.and(this.ints, this.i + FLAGS, ~UNHEALTHY)
    else Atomics.or(this.ints, this.i + FLAGS, UNHEALTHY)
  }
  get lastPicked(): number {
    return this.floats[this.f + LAST_PICKED]!
  }
  set lastPicked(value: number) {
    this.floats[this.f + LAST_PICKED] = value
  }
}

export class SharedBalancer {
  private readonly ints: Int32Array
  private readonly floats: Float64Array
  private readonly addresses: number
  private readonly servers: number
  private readonly ledgers: number
  private readonly activeLedgers: number
  private readonly mine: number
  private readonly serverLocks: number
  private readonly picks: number
  private readonly holder: number
  private readonly control: boolean
  /**
   * Thread-local caches: one view per address slot, one pick counter per server slot, made on first use. They grow
   * to the highest slot used (slots are handed out from 0 up), so an unused capacity costs no heap.
   */
  private readonly views: Array<SharedAddressState | undefined> = []
  private readonly pickCounters: Array<(() => number) | undefined> = []

  constructor(buffers: SharedBuffers, worker: number) {
    const { layout } = buffers
    const offsets = balancerLayout(layout)
    this.ints = int32View(buffers, "balancerInts")
    this.floats = float64View(buffers, "balancerFloats")
    this.addresses = layout.addressSlots
    this.servers = layout.serverSlots
    this.ledgers = layout.ledgers
    this.activeLedgers = offsets.activeLedgers
    this.mine = offsets.activeLedgers + worker * layout.addressSlots
    this.serverLocks = offsets.serverLocks
    this.picks = offsets.picks
    this.holder = worker + 1
    this.control = worker === layout.workers
  }

  /** The state of `addressSlot` (0 <= slot < addressSlots), the same object on every call from this thread. */
  state(addressSlot: number): AddressState {
    let view = this.views[addressSlot]
    if (view === undefined) {
      this.checkAddress(addressSlot)
      view = new SharedAddressState(this.ints, this.floats, addressSlot * BALANCER_INT_WORDS, addressSlot * BALANCER_FLOAT_WORDS)
      while (this.views.length < addressSlot) this.views.push(undefined)
      this.views[addressSlot] = view
    }
    return view
  }

  /** Counts a live session on `addressSlot` for least_conn until the release is called (idempotent). */
  acquire(addressSlot: number): Release {
    this.checkAddress(addressSlot)
    const at = addressSlot * BALANCER_INT_WORDS + ACTIVE
    const generation = take(this.ints, at, 0)
    if (generation < 0) return () => {}
    const ledger = this.mine + addressSlot
    record(this.ints, ledger, generation)
    let released = false
    return () => {
      if (released) return
      released = true
      // The ledger first: once releaseWorker emptied it, a late release gives nothing back twice.
      if (giveBack(this.ints, ledger, generation)) giveBack(this.ints, at, generation)
    }
  }

  /**
   * Takes `serverSlot`'s lock, for orderCandidates and other read-modify-writes of its addresses. A worker waits as
   * long as it takes (true); the control thread waits at most 250 ms (false: not taken).
   */
  lockServer(serverSlot: number): boolean {
    this.checkServer(serverSlot)
    const at = this.serverLocks + serverSlot * SERVER_LOCK_WORDS
    if (this.control) return lockWithin(this.ints, at, this.holder, CONTROL_WAIT_MS)
    lock(this.ints, at, this.holder)
    return true
  }

  unlockServer(serverSlot: number): void {
    this.checkServer(serverSlot)
    unlock(this.ints, this.serverLocks + serverSlot * SERVER_LOCK_WORDS)
  }

  /** The next pick number of `serverSlot`, shared by every thread: call it under the server's lock. */
  nextPick(serverSlot: number): number {
    this.checkServer(serverSlot)
    return ++this.floats[this.picks + serverSlot]!
  }

  /** `nextPick` for one server as a function (for orderCandidates), the same function on every call. */
  pickCounter(serverSlot: number): () => number {
    let counter = this.pickCounters[serverSlot]
    if (counter === undefined) {
      this.checkServer(serverSlot)
      const at = this.picks + serverSlot
      const floats = this.floats
      counter = () => ++floats[at]!
      while (this.pickCounters.length < serverSlot) this.pickCounters.push(undefined)
      this.pickCounters[serverSlot] = counter
    }
    return counter
  }

  /**
   * Makes `addressSlot` fresh for a new address (control thread, when the slot allocator reassigns it): releases of
   * sessions counted before change nothing.
   */
  reset(addressSlot: number): void {
    this.checkAddress(addressSlot)
    const i = addressSlot * BALANCER_INT_WORDS
    const f = addressSlot * BALANCER_FLOAT_WORDS
    const generation = resetPlaces(this.ints, i + ACTIVE)
    for (let ledger = 0; ledger < this.ledgers; ledger++) {
      resetLedger(this.ints, this.activeLedgers + ledger * this.addresses + addressSlot, generation)
    }
    Atomics.store(this.ints, i + FAILURES, 0)
    this.floats.fill(0, f, f + BALANCER_FLOAT_WORDS)
    Atomics.store(this.ints, i + FLAGS, 0)
  }

  /** Empties a server slot's pick counter (control thread, when the slot allocator reassigns it). */
  resetServer(serverSlot: number): void {
    this.checkServer(serverSlot)
    this.floats[this.picks + serverSlot] = 0
  }

  /** Gives back the least_conn counts `worker` held (it died); how many sessions. */
  releaseWorker(worker: number): number {
    if (worker < 0 || worker >= this.ledgers) return 0
    let released = 0
    const from = this.activeLedgers + worker * this.addresses
    for (let slot = 0; slot < this.addresses; slot++) {
      released += releaseLedger(this.ints, slot * BALANCER_INT_WORDS + ACTIVE, from + slot)
    }
    return released
  }

  /** Frees every server lock `worker` holds (it died inside a critical section); how many. */
  forceUnlock(worker: number): number {
    let freed = 0
    for (let slot = 0; slot < this.servers; slot++) {
      const at = this.serverLocks + slot * SERVER_LOCK_WORDS
      if (holderOf(this.ints, at) === worker + 1 && forceUnlock(this.ints, at, worker + 1)) freed += 1
    }
    return freed
  }

  private checkAddress(slot: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.addresses) {
      throw new RangeError(`shared balancer: address slot ${slot} is outside 0..${this.addresses - 1}`)
    }
  }

  private checkServer(slot: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.servers) {
      throw new RangeError(`shared balancer: server slot ${slot} is outside 0..${this.servers - 1}`)
    }
  }
}
