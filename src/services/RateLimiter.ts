/**
 * RateLimiter: per client IP, logins and status pings in separate sliding windows (`[rate_limit]`), and, always
 * on, a bound on handshakes in progress per IP and in total so that a flood from one address cannot starve others.
 * The state is the shared per-IP table (services/shared/IpTable.ts), so the limits hold proxy-wide whichever thread
 * a connection lands on; memory stays bounded however many addresses arrive (the table's capacities and LRU).
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { GlobalConfig } from "../schema/GlobalConfig.js"
import { ConfigStore } from "./ConfigStore.js"
import { type Link, LiveList } from "./collections/LiveList.js"
import type { WaitingWatcher } from "./net/SocketReader.js"
import type { HandshakeHold, IpTable } from "./shared/IpTable.js"
import { SharedMemory } from "./SharedMemory.js"
import { type FloodMemory, threadFloodMemory } from "./runtime/floodMemory.js"

/** Handshakes one address may have in progress at once. */
export const MAX_PENDING_HANDSHAKES_PER_IP = 8
/** Handshakes in progress at once, all addresses together. */
export const MAX_PENDING_HANDSHAKES = 1024
/**
 * A handshake's place under the flood bound. A connection holds it from its PROXY header to its Login Start (or to
 * the end of its status exchange).
 */
export interface HandshakePlace extends WaitingWatcher {
  /** Gives the place back; again is a no-op. */
  readonly release: () => void
  /**
   * Whether the connection is waiting for its client's bytes (its reader tells, SocketReader.onWaiting). Only such a
   * connection gives way when every place is taken, the one that has waited longest first: a flood that stalls is
   * always waiting, while a real client's bytes come within a round trip and are then being answered.
   */
  waiting(waiting: boolean): void
}

/** The connection a place belongs to, as the flood bound sees it. */
export interface HandshakeOwner {
  /** It gave way to a newcomer: it closes itself (and counts why). */
  evicted(): void
}

/** The connection path's surface: synchronous, called for every connection. */
export interface RateLimiterDataPlane {
  /** Counts an attempt of `kind` by `ip` at `now` (epoch ms); false when the address is over `[rate_limit]`. */
  readonly allow: (kind: "login" | "status", ip: string, nowMs: number, global: GlobalConfig) => boolean
  /**
   * Takes a handshake place for `ip`; undefined when the address has too many handshakes in progress. When the proxy
   * as a whole has, the connection of this thread that has waited longest for its client gives way: its place passes
   * to the newcomer and its owner is `evicted` (it closes the connection); with none waiting, the newcomer is refused.
   */
  readonly enterHandshake: (ip: string, owner: HandshakeOwner) => HandshakePlace | undefined
}

/** A place, and its link in the thread's waiting list while its connection waits. */
class Place implements HandshakePlace {
  private link: Link<Place> | undefined = undefined

  constructor(
    private readonly waitingList: LiveList<Place>,
    private readonly hold: HandshakeHold,
    private readonly owner: HandshakeOwner
  ) {}

  /**
   * Gives way to a newcomer from `ip`: the place passes to it in the table (no other thread can take it in between)
   * and this connection is closed. The newcomer's hold; undefined when the table would not pass it (this place then
   * stays, still waiting).
   */
  giveWayTo(table: IpTable, ip: string): HandshakeHold | undefined {
    const passed = table.handOver(this.hold, ip, MAX_PENDING_HANDSHAKES_PER_IP)
    if (passed === undefined) return undefined
    this.waiting(false)
    this.owner.evicted()
    return passed
  }

  readonly release = (): void => {
    this.waiting(false)
    this.hold.release()
  }

  waiting(waiting: boolean): void {
    if (waiting) {
      if (!this.hold.ended && this.link === undefined) this.link = this.waitingList.add(this)
    } else if (this.link !== undefined) {
      this.waitingList.remove(this.link)
      this.link = undefined
    }
  }
}

/**
 * The data plane over the shared per-IP table: the same decisions on every thread (services/shared/IpTable.ts).
 * Each thread keeps its own connections waiting for their clients, longest waiting first.
 */
export const rateLimiterDataPlane = (table: IpTable, floodMemory: FloodMemory = threadFloodMemory()): RateLimiterDataPlane => {
  const waitingList = new LiveList<Place>()
  return {
    allow: (kind, ip, nowMs, global) => {
      const { rate_limit } = global
      if (!rate_limit.enabled) return true
      return kind === "login"
        ? table.hit("login", ip, nowMs, rate_limit.max_connections, Duration.toMillis(rate_limit.window))
        : table.hit("status", ip, nowMs, rate_limit.status_max, Duration.toMillis(rate_limit.status_window))
    },
    enterHandshake: (ip, owner) => {
      const hold = table.enterHandshake(ip, MAX_PENDING_HANDSHAKES_PER_IP, MAX_PENDING_HANDSHAKES)
      if (hold !== undefined) return new Place(waitingList, hold, owner)
      // Refused with every place taken (not for this address's own bound): the longest waiting of ours gives way.
      if (table.lastRefusal !== "full") return undefined
      floodMemory.flooded()
      const passed = waitingList.oldest()?.giveWayTo(table, ip)
      return passed === undefined ? undefined : new Place(waitingList, passed, owner)
    }
  }
}

/** Addresses forgotten per sweep at most, so that one sweep never holds the table long. */
const SWEEP_BUDGET = 20_000

export class RateLimiter extends Effect.Service<RateLimiter>()("portal/RateLimiter", {
  scoped: Effect.gen(function* () {
    const store = yield* ConfigStore
    const table = (yield* SharedMemory).ipTable

    // Addresses with no event left in their windows and no handshake in progress are forgotten (the table also
    // forgets the least recently seen when it is full). This thread sweeps for all of them.
    const sweepOnce = Effect.gen(function* () {
      const { rate_limit } = (yield* store.get).global
      const now = yield* Clock.currentTimeMillis
      table.sweep(now, Duration.toMillis(rate_limit.window), Duration.toMillis(rate_limit.status_window), SWEEP_BUDGET)
    })
    yield* sweepOnce.pipe(Effect.delay(Duration.seconds(10)), Effect.forever, Effect.forkScoped)

    return {
      dataPlane: rateLimiterDataPlane(table),
      /** Handshakes in progress, all threads together. */
      pendingHandshakes: Effect.sync(() => table.stats().pendingTotal),
      /** Addresses tracked and events stored, all threads together. */
      tracked: Effect.sync(() => table.stats())
    }
  })
}) {}
