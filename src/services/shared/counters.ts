/**
 * Proxy-wide counters with exact limits, shared by every thread: connections (`max_connections`) and players per
 * server slot (`max_players`). A place is taken with a check-and-increment (places.ts), so two threads can never
 * both take the last one, and recorded in the taking thread's ledger word, so that `releaseWorker` gives back what a
 * dead worker held.
 */
import { countersLayout, int32View, type SharedBuffers } from "./layout.js"
import { countOf, giveBack, record, releaseLedger, type Release, resetLedger, resetPlaces, take } from "./places.js"

export class ConnectionCounter {
  private readonly words: Int32Array
  private readonly at: number
  private readonly mine: number
  private readonly ledgers: number
  private readonly ledgerBase: number
  private readonly ledgerStride: number

  constructor(buffers: SharedBuffers, worker: number) {
    const offsets = countersLayout(buffers.layout)
    this.words = int32View(buffers, "counters")
    this.at = offsets.connections
    this.ledgerBase = offsets.connectionLedgers
    this.ledgerStride = offsets.ledgerStride
    this.mine = offsets.connectionLedgers + worker * offsets.ledgerStride
    this.ledgers = buffers.layout.ledgers
  }

  /** Takes a connection place until the release is called; undefined when `max` are taken (`max` 0: no limit). */
  enter(max: number): Release | undefined {
    const generation = take(this.words, this.at, max)
    if (generation < 0) return undefined
    record(this.words, this.mine, generation)
    let released = false
    return () => {
      if (released) return
      released = true
      // The ledger first: once releaseWorker emptied it, a late release gives nothing back twice.
      if (giveBack(this.words, this.mine, generation)) giveBack(this.words, this.at, generation)
    }
  }

  /** Connections open, all threads together. */
  count(): number {
    return countOf(Atomics.load(this.words, this.at))
  }

  /** Gives back every place `worker` holds (it died); how many. */
  releaseWorker(worker: number): number {
    if (worker < 0 || worker >= this.ledgers) return 0
    return releaseLedger(this.words, this.at, this.ledgerBase + worker * this.ledgerStride)
  }
}

export class PlayerCounter {
  private readonly words: Int32Array
  private readonly base: number
  private readonly ledgerBase: number
  private readonly mine: number
  private readonly servers: number
  private readonly ledgers: number

  constructor(buffers: SharedBuffers, worker: number) {
    const offsets = countersLayout(buffers.layout)
    this.words = int32View(buffers, "counters")
    this.base = offsets.players
    this.ledgerBase = offsets.playerLedgers
    this.servers = buffers.layout.serverSlots
    this.ledgers = buffers.layout.ledgers
    this.mine = offsets.playerLedgers + worker * this.servers
  }

  /**
   * Takes a player place on `serverSlot` until the release is called; undefined when `max` are taken (`max` 0: no
   * limit).
   */
  admit(serverSlot: number, max: number): Release | undefined {
    this.check(serverSlot)
    const at = this.base + serverSlot
    const generation = take(this.words, at, max)
    if (generation < 0) return undefined
    const ledger = this.mine + serverSlot
    record(this.words, ledger, generation)
    let released = false
    return () => {
      if (released) return
      released = true
      if (giveBack(this.words, ledger, generation)) giveBack(this.words, at, generation)
    }
  }

  /** Players on `serverSlot`, all threads together. */
  count(serverSlot: number): number {
    this.check(serverSlot)
    return countOf(Atomics.load(this.words, this.base + serverSlot))
  }

  /**
   * Empties `serverSlot` for a new server (control thread, when the slot allocator reassigns it): releases of places
   * taken before change nothing.
   */
  reset(serverSlot: number): void {
    this.check(serverSlot)
    const generation = resetPlaces(this.words, this.base + serverSlot)
    for (let ledger = 0; ledger < this.ledgers; ledger++) {
      resetLedger(this.words, this.ledgerBase + ledger * this.servers + serverSlot, generation)
    }
  }

  /** Gives back every place `worker` holds on any server (it died); how many. */
  releaseWorker(worker: number): number {
    if (worker < 0 || worker >= this.ledgers) return 0
    let released = 0
    const from = this.ledgerBase + worker * this.servers
    for (let slot = 0; slot < this.servers; slot++) released += releaseLedger(this.words, this.base + slot, from + slot)
    return released
  }

  /** A slot out of range is a bug in the caller (slots come from the slot allocator): a RangeError. */
  private check(serverSlot: number): void {
    if (!Number.isInteger(serverSlot) || serverSlot < 0 || serverSlot >= this.servers) {
      throw new RangeError(`shared players: server slot ${serverSlot} is outside 0..${this.servers - 1}`)
    }
  }
}
