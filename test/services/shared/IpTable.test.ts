/** The shared address table on one thread: windows, handshakes, eviction, sweep, ledgers, and exactness. */
import { describe, expect, it } from "vitest"
import { SlidingWindowLimiter } from "./slidingWindowModel.js"
import { int32View } from "../../../src/services/shared/layout.js"
import { attachSharedState, createSharedState, type SharedStateOptions } from "../../../src/services/shared/SharedState.js"

const make = (options: Partial<SharedStateOptions> = {}) => createSharedState({ workers: 2, ...options })

/** A small deterministic generator, so a failing sequence can be replayed. */
const random = (seed: number) => () => {
  seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) | 0
  return ((seed ^ (seed >>> 12)) >>> 0) / 0x100000000
}

describe("IpTable windows", () => {
  it("allows `limit` events per window per address, logins and pings apart, sliding with no fixed boundary", () => {
    const { ipTable } = make()
    const hits = (times: Array<number>, ip = "10.0.0.1") => times.map((t) => ipTable.hit("login", ip, t, 3, 10_000))
    expect(hits([0, 5000, 9000, 9999])).toEqual([true, true, true, false])
    // Another address and the other kind have their own windows.
    expect(ipTable.hit("login", "10.0.0.2", 9999, 3, 10_000)).toBe(true)
    expect(ipTable.hit("status", "10.0.0.1", 9999, 1, 10_000)).toBe(true)
    expect(ipTable.hit("status", "10.0.0.1", 9999, 1, 10_000)).toBe(false)
    // At 10 s the event of 0 s has left the window, not those of 5 s and 9 s.
    expect(hits([10_000, 10_001, 15_000, 15_001])).toEqual([true, false, true, false])
    expect(ipTable.lookup("10.0.0.1")).toEqual({ pending: 0, logins: 3, statuses: 1 })
  })

  it("does not store refused events: hammering does not extend the wait", () => {
    const { ipTable } = make()
    expect(ipTable.hit("login", "10.0.0.1", 0, 1, 1000)).toBe(true)
    for (let t = 1; t < 1000; t += 10) expect(ipTable.hit("login", "10.0.0.1", t, 1, 1000)).toBe(false)
    expect(ipTable.stats().storedEvents).toBe(1)
    expect(ipTable.hit("login", "10.0.0.1", 1000, 1, 1000)).toBe(true)
  })

  it("counts events ahead of a clock stepped back as now", () => {
    const { ipTable } = make()
    expect(ipTable.hit("login", "10.0.0.1", 50_000, 2, 10_000)).toBe(true)
    expect(ipTable.hit("login", "10.0.0.1", 50_000, 2, 10_000)).toBe(true)
    // The clock goes back 40 s: both events count as at 10 s, so the address waits one window, not 50 s.
    expect(ipTable.hit("login", "10.0.0.1", 10_000, 2, 10_000)).toBe(false)
    expect(ipTable.hit("login", "10.0.0.1", 19_999, 2, 10_000)).toBe(false)
    expect(ipTable.hit("login", "10.0.0.1", 20_000, 2, 10_000)).toBe(true)
  })

  it("keeps long windows in chained chunks of 8 times, freeing them as they expire", () => {
    const { ipTable } = make({ ipChunks: 64 })
    // 100 events 10 ms apart: 13 chunks.
    for (let i = 0; i < 100; i++) expect(ipTable.hit("login", "10.0.0.1", i * 10, 100, 2000)).toBe(true)
    expect(ipTable.hit("login", "10.0.0.1", 999, 100, 2000)).toBe(false)
    expect(ipTable.stats().storedEvents).toBe(100)
    // At 2 s + 5 ms, the 51 events up to 500 ms have expired (start mid-chunk, across 6 chunk boundaries).
    expect(ipTable.hit("login", "10.0.0.1", 2505, 100, 2000)).toBe(true)
    expect(ipTable.lookup("10.0.0.1")?.logins).toBe(50)
    // The chunks freed are reused: 64 chunks hold 7 more addresses of 8 events (plus this one's 7 chunks).
    for (let a = 0; a < 7; a++) {
      for (let i = 0; i < 64; i++) expect(ipTable.hit("status", `10.0.1.${a}`, 2505, 64, 2000)).toBe(true)
    }
    expect(ipTable.stats()).toMatchObject({ addresses: 8, storedEvents: 50 + 7 * 64 })
    expect(ipTable.lookup("10.0.0.1")?.logins).toBe(50)
  })

  it("takes IPv4-mapped IPv6 as IPv4, and any text as a key", () => {
    const { ipTable } = make()
    expect(ipTable.hit("login", "192.0.2.1", 0, 2, 1000)).toBe(true)
    expect(ipTable.hit("login", "::ffff:192.0.2.1", 0, 2, 1000)).toBe(true)
    expect(ipTable.hit("login", "::FFFF:c000:0201", 0, 2, 1000)).toBe(false)
    expect(ipTable.hit("login", "unknown", 0, 1, 1000)).toBe(true)
    expect(ipTable.hit("login", "unknown", 0, 1, 1000)).toBe(false)
    expect(ipTable.hit("login", "unknown2", 0, 1, 1000)).toBe(true)
    expect(ipTable.stats().addresses).toBe(3)
  })

  it("a limit of 0 refuses everything and stores nothing", () => {
    const { ipTable } = make()
    expect(ipTable.hit("login", "10.0.0.1", 0, 0, 1000)).toBe(false)
    expect(ipTable.stats()).toEqual({ addresses: 0, storedEvents: 0, pendingTotal: 0 })
  })
})

describe("IpTable eviction", () => {
  it("forgets the least recently seen address when the slots run out, never the one being counted", () => {
    const { ipTable } = make({ ipSlots: 3 })
    for (const ip of ["10.0.0.1", "10.0.0.2", "10.0.0.3"]) ipTable.hit("login", ip, 0, 5, 1000)
    ipTable.hit("status", "10.0.0.1", 1, 5, 1000) // seen again: 10.0.0.2 is now the least recent
    ipTable.hit("login", "10.0.0.4", 2, 5, 1000)
    expect(ipTable.lookup("10.0.0.2")).toBeUndefined()
    expect(ipTable.lookup("10.0.0.1")).toEqual({ pending: 0, logins: 1, statuses: 1 })
    expect(ipTable.stats()).toEqual({ addresses: 3, storedEvents: 4, pendingTotal: 0 })
    // A refused hit counts as seen too.
    ipTable.hit("login", "10.0.0.3", 3, 0, 1000)
    ipTable.hit("login", "10.0.0.5", 4, 5, 1000)
    expect(ipTable.lookup("10.0.0.1")).toBeUndefined()
    expect(ipTable.lookup("10.0.0.3")).toBeDefined()
  })

  it("forgets the least recently seen addresses when the chunks run out", () => {
    const { ipTable } = make({ ipChunks: 4 })
    for (const ip of ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]) ipTable.hit("login", ip, 0, 20, 1000)
    // 10.0.0.5 needs two chunks (9 events): the two least recent addresses go.
    for (let i = 0; i < 9; i++) expect(ipTable.hit("login", "10.0.0.5", 1, 20, 1000)).toBe(true)
    expect(ipTable.lookup("10.0.0.1")).toBeUndefined()
    expect(ipTable.lookup("10.0.0.2")).toBeUndefined()
    expect(ipTable.lookup("10.0.0.3")?.logins).toBe(1)
    expect(ipTable.stats()).toEqual({ addresses: 3, storedEvents: 11, pendingTotal: 0 })
  })

  it("refuses rather than evict the address being counted when it alone holds every chunk", () => {
    const { ipTable } = make({ ipChunks: 2 })
    for (let i = 0; i < 16; i++) expect(ipTable.hit("login", "10.0.0.1", 0, 100, 1000)).toBe(true)
    expect(ipTable.hit("login", "10.0.0.1", 0, 100, 1000)).toBe(false)
    expect(ipTable.lookup("10.0.0.1")?.logins).toBe(16)
    // Another address is counted now: 10.0.0.1 is the least recently seen, and goes.
    expect(ipTable.hit("login", "10.0.0.2", 0, 100, 1000)).toBe(true)
    expect(ipTable.lookup("10.0.0.1")).toBeUndefined()
    expect(ipTable.stats()).toEqual({ addresses: 1, storedEvents: 1, pendingTotal: 0 })
  })

  it("never evicts an address with a handshake in progress, under either bound", () => {
    const { ipTable } = make({ ipSlots: 2, ipChunks: 2 })
    const release = ipTable.enterHandshake("10.0.0.1", 8, 1024)!
    ipTable.hit("login", "10.0.0.1", 0, 5, 1000)
    // The other slot and the other chunk go round among new addresses; 10.0.0.1 stays.
    for (let i = 2; i < 50; i++) expect(ipTable.hit("login", `10.0.0.${i}`, 0, 5, 1000)).toBe(true)
    expect(ipTable.lookup("10.0.0.1")).toEqual({ pending: 1, logins: 1, statuses: 0 })
    // Once its handshake ended it is the most recent address, then the least recent after one more.
    release.release()
    ipTable.hit("login", "10.0.0.60", 0, 5, 1000)
    expect(ipTable.lookup("10.0.0.1")).toBeDefined()
    ipTable.hit("login", "10.0.0.61", 0, 5, 1000)
    expect(ipTable.lookup("10.0.0.1")).toBeUndefined()
  })

  it("when every slot has a handshake in progress, a new address is refused", () => {
    const { ipTable } = make({ ipSlots: 2 })
    expect(ipTable.enterHandshake("10.0.0.1", 8, 1024)).toBeDefined()
    expect(ipTable.enterHandshake("10.0.0.2", 8, 1024)).toBeDefined()
    expect(ipTable.enterHandshake("10.0.0.3", 8, 1024)).toBeUndefined()
    expect(ipTable.hit("login", "10.0.0.3", 0, 5, 1000)).toBe(false)
    expect(ipTable.stats()).toEqual({ addresses: 2, storedEvents: 0, pendingTotal: 2 })
  })
})

describe("IpTable handshakes", () => {
  it("bounds handshakes per address and in total; releases are idempotent", () => {
    const { ipTable } = make()
    const mine = Array.from({ length: 3 }, () => ipTable.enterHandshake("10.0.0.1", 3, 5))
    expect(mine.every((r) => r !== undefined)).toBe(true)
    expect(ipTable.enterHandshake("10.0.0.1", 3, 5)).toBeUndefined()
    const others = [ipTable.enterHandshake("10.0.0.2", 3, 5), ipTable.enterHandshake("10.0.0.3", 3, 5)]
    expect(others.every((r) => r !== undefined)).toBe(true)
    expect(ipTable.enterHandshake("10.0.0.4", 3, 5)).toBeUndefined()
    expect(ipTable.stats().pendingTotal).toBe(5)
    mine[0]!.release()
    mine[0]!.release()
    expect(ipTable.stats().pendingTotal).toBe(4)
    expect(ipTable.lookup("10.0.0.1")?.pending).toBe(2)
    expect(ipTable.enterHandshake("10.0.0.4", 3, 5)).toBeDefined()
    expect(ipTable.enterHandshake("10.0.0.1", 3, 6)).toBeDefined()
  })

  it("forgets an address with no event once its last handshake ends, keeps one with events", () => {
    const { ipTable } = make()
    const a = ipTable.enterHandshake("10.0.0.1", 8, 1024)!
    const b = ipTable.enterHandshake("10.0.0.2", 8, 1024)!
    ipTable.hit("status", "10.0.0.2", 0, 5, 1000)
    a.release()
    b.release()
    expect(ipTable.lookup("10.0.0.1")).toBeUndefined()
    expect(ipTable.lookup("10.0.0.2")).toEqual({ pending: 0, logins: 0, statuses: 1 })
    expect(ipTable.stats()).toEqual({ addresses: 1, storedEvents: 1, pendingTotal: 0 })
  })

  it("refuses when the thread's ledger is full, and reuses released positions", () => {
    const { ipTable } = make({ handshakesPerWorker: 2 })
    const a = ipTable.enterHandshake("10.0.0.1", 8, 1024)!
    expect(ipTable.enterHandshake("10.0.0.2", 8, 1024)).toBeDefined()
    expect(ipTable.enterHandshake("10.0.0.3", 8, 1024)).toBeUndefined()
    a.release()
    expect(ipTable.enterHandshake("10.0.0.3", 8, 1024)).toBeDefined()
  })

  it("releaseWorker gives back what a dead worker held, and its late releases change nothing", () => {
    const control = make()
    const worker0 = attachSharedState(control.buffers, 0)
    const worker1 = attachSharedState(control.buffers, 1)
    const held0 = [worker0.ipTable.enterHandshake("10.0.0.1", 8, 1024)!, worker0.ipTable.enterHandshake("10.0.0.1", 8, 1024)!]
    worker0.ipTable.enterHandshake("10.0.0.2", 8, 1024)
    const held1 = worker1.ipTable.enterHandshake("10.0.0.1", 8, 1024)!
    expect(control.ipTable.stats().pendingTotal).toBe(4)
    expect(control.ipTable.releaseWorker(0)).toBe(3)
    expect(control.ipTable.stats()).toEqual({ addresses: 1, storedEvents: 0, pendingTotal: 1 })
    expect(control.ipTable.lookup("10.0.0.1")?.pending).toBe(1)
    for (const hold of held0) hold.release()
    expect(control.ipTable.stats().pendingTotal).toBe(1)
    held1.release()
    expect(control.ipTable.stats()).toEqual({ addresses: 0, storedEvents: 0, pendingTotal: 0 })
    // A replacement worker with the same index starts from an empty ledger.
    const replacement = attachSharedState(control.buffers, 0)
    expect(replacement.ipTable.enterHandshake("10.0.0.1", 8, 1024)).toBeDefined()
    expect(control.ipTable.releaseWorker(0)).toBe(1)
  })

  it("handOver passes a place to another address in one step: the total stays, nobody else can take it between", () => {
    const control = make()
    const worker0 = attachSharedState(control.buffers, 0)
    const worker1 = attachSharedState(control.buffers, 1)
    const old = worker0.ipTable.enterHandshake("10.0.0.1", 8, 2)!
    expect(worker1.ipTable.enterHandshake("10.0.0.2", 8, 2)).toBeDefined()
    expect(worker1.ipTable.enterHandshake("10.0.0.3", 8, 2)).toBeUndefined()
    const passed = worker0.ipTable.handOver(old, "10.0.0.4", 8)!
    expect(passed).toBeDefined()
    expect(old.ended).toBe(true)
    expect(control.ipTable.stats().pendingTotal).toBe(2)
    expect(control.ipTable.lookup("10.0.0.1")).toBeUndefined()
    expect(control.ipTable.lookup("10.0.0.4")?.pending).toBe(1)
    // The place is the newcomer's: the other thread is still refused, and the old hold gives nothing back.
    expect(worker1.ipTable.enterHandshake("10.0.0.3", 8, 2)).toBeUndefined()
    old.release()
    expect(control.ipTable.stats().pendingTotal).toBe(2)
    // A hold passed on already, or a newcomer at its own bound, is not passed (the place stays where it is).
    expect(worker0.ipTable.handOver(old, "10.0.0.5", 8)).toBeUndefined()
    const bounded = worker0.ipTable.handOver(passed, "10.0.0.2", 1)
    expect(bounded).toBeUndefined()
    expect(passed.ended).toBe(false)
    expect(control.ipTable.lookup("10.0.0.4")?.pending).toBe(1)
    passed.release()
    expect(control.ipTable.lookup("10.0.0.4")).toBeUndefined()
    expect(control.ipTable.stats().pendingTotal).toBe(1)
    // A dead worker's places, given back by the control thread, are not passed on afterwards.
    const held = worker0.ipTable.enterHandshake("10.0.0.6", 8, 2)!
    expect(control.ipTable.releaseWorker(0)).toBe(1)
    expect(worker0.ipTable.handOver(held, "10.0.0.7", 8)).toBeUndefined()
    expect(control.ipTable.stats().pendingTotal).toBe(1)
  })

  it("forceUnlock frees the lock only for the worker holding it; the control thread gives up on a held lock", () => {
    const control = make()
    const header = int32View(control.buffers, "ipHeader")
    Atomics.store(header, 0, 2) // worker 1 died holding the lock
    const started = performance.now()
    expect(control.ipTable.sweep(0, 1000, 1000, 10)).toBeUndefined()
    expect(performance.now() - started).toBeGreaterThanOrEqual(200)
    expect(control.ipTable.forceUnlock(0)).toBe(false)
    expect(control.ipTable.forceUnlock(1)).toBe(true)
    expect(control.ipTable.sweep(0, 1000, 1000, 10)).toBe(0)
    expect(Atomics.load(header, 0)).toBe(0)
    // releaseWorker frees it too.
    Atomics.store(header, 0, 1)
    expect(control.releaseWorker(0)).toMatchObject({ handshakes: 0, locksFreed: 1 })
  })
})

describe("IpTable sweep", () => {
  it("forgets addresses with nothing in their windows and no handshake, within its budget", () => {
    const { ipTable } = make()
    for (let i = 0; i < 10; i++) ipTable.hit("login", `10.0.0.${i}`, 0, 5, 1000)
    ipTable.hit("status", "10.0.0.3", 0, 5, 60_000) // a ping window is longer
    const release = ipTable.enterHandshake("10.0.0.4", 8, 1024)!
    ipTable.hit("login", "10.0.0.5", 1500, 5, 1000) // still inside its window at 2 s
    // Slots 1..4 (10.0.0.0 to .3): three forgotten, .3 keeps its ping.
    expect(ipTable.sweep(2000, 1000, 60_000, 4)).toBe(3)
    expect(ipTable.stats().addresses).toBe(7)
    // The next sweep goes on from there, bounded by the slots in use: .6 to .9.
    expect(ipTable.sweep(2000, 1000, 60_000, 100)).toBe(4)
    expect(ipTable.stats()).toEqual({ addresses: 3, storedEvents: 2, pendingTotal: 1 })
    expect(ipTable.lookup("10.0.0.3")).toEqual({ pending: 0, logins: 0, statuses: 1 })
    expect(ipTable.lookup("10.0.0.4")).toEqual({ pending: 1, logins: 0, statuses: 0 })
    expect(ipTable.lookup("10.0.0.5")).toEqual({ pending: 0, logins: 1, statuses: 0 })
    release.release()
    expect(ipTable.sweep(70_000, 1000, 60_000, 100)).toBe(2)
    expect(ipTable.stats()).toEqual({ addresses: 0, storedEvents: 0, pendingTotal: 0 })
  })

  it("an empty table sweeps nothing", () => {
    const { ipTable } = make()
    expect(ipTable.sweep(0, 1000, 1000, 1000)).toBe(0)
  })
})

describe("IpTable against SlidingWindowLimiter", () => {
  /** Random hits (and sweeps) from a pool of addresses, the clock mostly forward, sometimes stepped back. */
  const compare = (seed: number, options: { ops: number; pool: number; maxTracked: number; sweeps: boolean }) => {
    const next = random(seed)
    const { ipTable } = make({ ipSlots: options.maxTracked, ipChunks: 100_000 })
    const logins = new SlidingWindowLimiter(options.maxTracked, 1_000_000)
    const pings = new SlidingWindowLimiter(options.maxTracked, 1_000_000)
    const limit = 1 + Math.floor(next() * 12)
    const windowMs = 100 + Math.floor(next() * 2000)
    const statusLimit = 1 + Math.floor(next() * 20)
    let now = 1_000_000
    let differences = 0
    let allowed = 0
    for (let op = 0; op < options.ops; op++) {
      const step = next()
      now += step < 0.01 ? -Math.floor(next() * 3000) : Math.floor(next() * 60)
      const n = Math.floor(next() * options.pool)
      const ip = next() < 0.5 ? `10.1.${n}.1` : `2001:db8::${n.toString(16)}`
      if (options.sweeps && next() < 0.002) {
        logins.sweep(now, windowMs)
        pings.sweep(now, windowMs)
        ipTable.sweep(now, windowMs, windowMs, 1_000_000)
        continue
      }
      const login = options.maxTracked < options.pool || next() < 0.5
      const expected = login ? logins.hit(ip, now, limit, windowMs) : pings.hit(ip, now, statusLimit, windowMs)
      const actual = ipTable.hit(login ? "login" : "status", ip, now, login ? limit : statusLimit, windowMs)
      if (expected !== actual) differences += 1
      if (actual) allowed += 1
    }
    return { differences, allowed, stored: ipTable.stats().storedEvents, expectedStored: logins.storedEvents + pings.storedEvents }
  }

  it("makes the same decisions on random sequences (both kinds, clock steps back, sweeps)", () => {
    for (let seed = 1; seed <= 12; seed++) {
      const result = compare(seed, { ops: 20_000, pool: 40, maxTracked: 100_000, sweeps: true })
      expect(result.differences, `seed ${seed}`).toBe(0)
      expect(result.allowed).toBeGreaterThan(1000)
      expect(result.allowed).toBeLessThan(20_000)
      expect(result.stored).toBe(result.expectedStored)
    }
  })

  it("makes the same decisions while evicting the least recently seen (addresses bound)", () => {
    for (let seed = 100; seed <= 105; seed++) {
      const result = compare(seed, { ops: 20_000, pool: 120, maxTracked: 50, sweeps: false })
      expect(result.differences, `seed ${seed}`).toBe(0)
      expect(result.stored).toBe(result.expectedStored)
    }
  })
})
