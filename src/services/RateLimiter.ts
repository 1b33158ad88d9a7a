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
import { HandshakeQueue } from "./rateLimiter/handshakeQueue.js"
import type { IpTable } from "./shared/IpTable.js"
import { SharedMemory } from "./SharedMemory.js"

/** Handshakes one address may have in progress at once. */
export const MAX_PENDING_HANDSHAKES_PER_IP = 8
/** Handshakes in progress at once, all addresses together. */
export const MAX_PENDING_HANDSHAKES = 1024
/** The connection path's surface: synchronous, called for every connection. */
export interface RateLimiterDataPlane {
  /** Counts an attempt of `kind` by `ip` at `now` (epoch ms); false when the address is over `[rate_limit]`. */
  readonly allow: (kind: "login" | "status", ip: string, nowMs: number, global: GlobalConfig) => boolean
  /**
   * Takes a handshake slot for `ip` until the returned release is called (idempotent); undefined when the address
   * has too many handshakes in progress. When the proxy as a whole has, the oldest handshake this thread holds gives
   * way: its slot is released and `evict` of that connection runs (it closes the connection).
   */
  readonly enterHandshake: (ip: string, evict: () => void) => (() => void) | undefined
}

/**
 * The data plane over the shared per-IP table: the same decisions on every thread (services/shared/IpTable.ts).
 * Each thread keeps its own handshakes in progress in age order (rateLimiter/handshakeQueue.ts).
 */
export const rateLimiterDataPlane = (table: IpTable): RateLimiterDataPlane => {
  const queue = new HandshakeQueue()
  return {
    allow: (kind, ip, nowMs, global) => {
      const { rate_limit } = global
      if (!rate_limit.enabled) return true
      return kind === "login"
        ? table.hit("login", ip, nowMs, rate_limit.max_connections, Duration.toMillis(rate_limit.window))
        : table.hit("status", ip, nowMs, rate_limit.status_max, Duration.toMillis(rate_limit.status_window))
    },
    enterHandshake: (ip, evict) => {
      let release = table.enterHandshake(ip, MAX_PENDING_HANDSHAKES_PER_IP, MAX_PENDING_HANDSHAKES)
      // Refused with every place taken (not for this address's own bound): the oldest of ours gives way, once.
      if (release === undefined && table.lastRefusal === "full" && queue.evictOldest()) {
        release = table.enterHandshake(ip, MAX_PENDING_HANDSHAKES_PER_IP, MAX_PENDING_HANDSHAKES)
      }
      if (release === undefined) return undefined
      const taken = release
      const entry = queue.add(() => {
        taken()
        evict()
      })
      return () => {
        queue.remove(entry)
        taken()
      }
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
