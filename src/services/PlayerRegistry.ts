/**
 * PlayerRegistry: every live login session (from admission to close), the player counts derived from them, and the
 * way to end one from outside (a kick from the admin API, a ban made while the player is online).
 * Byte counters are read from the relay on demand, so it pays nothing per chunk.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Stream from "effect/Stream"
import type { ServerDefinition } from "../schema/decode.js"
import { undashedUuid } from "../protocol/uuid.js"
import { releaseOnce } from "./once.js"
import type { PlayerCounter } from "./shared/counters.js"
import { offlineUuid } from "../protocol/forwarding.js"
import type { OnlineClaim } from "./shared/onlinePlayers.js"
import { SharedMemory } from "./SharedMemory.js"
import type { ByteMeter } from "./relay/RelayMode.js"

export interface SessionEntry {
  readonly id: number
  readonly serverId: string
  readonly clientAddress: string
  readonly clientPort: number
  readonly protocolVersion: number
  readonly name: string | undefined
  readonly uuid: string | undefined
  /** Epoch milliseconds. */
  readonly since: number
}

/** A live session as reported to operators. */
export interface SessionSnapshot extends SessionEntry {
  readonly backendAddress: string | undefined
  readonly bytesIn: number
  readonly bytesOut: number
}

/**
 * A player joined (the relay to their backend started) or left (a session that had joined ended). Sessions that end
 * before they join produce neither.
 */
export type PlayerEvent =
  | { readonly _tag: "Joined"; readonly session: SessionSnapshot }
  | { readonly _tag: "Left"; readonly session: SessionSnapshot }

/** Events not yet taken by a slow subscriber are dropped beyond this many (oldest first). */
const EVENT_BUFFER = 1024

/** What ends a session from outside: before the relay, the login in progress; after, the relay. */
export interface SessionEnder {
  readonly end: (reason: string) => void
}

interface LiveSession {
  entry: SessionEntry
  backendAddress: string | undefined
  bytes: ByteMeter | undefined
  ender: SessionEnder | undefined
  /** Set once the session was asked to end, so an ender attached later ends it at once. */
  endedBecause: string | undefined
  /** Whether `Joined` was published (so that `Left` is too). */
  joined: boolean
}

/** A session's place in the registry; `release` removes it (idempotent). */
export interface SessionLease {
  readonly id: number
  /** How to end the session from now on (replacing any ender attached before). */
  readonly attachEnder: (ender: SessionEnder) => void
  /** Records the backend address once connected, and where the byte counts come from. */
  readonly attachBackend: (backendAddress: string, bytes: ByteMeter) => void
  /** Names the player as authentication found them (client_only): the place under max_players is kept. */
  readonly identify: (name: string, uuid: string | undefined) => void
  readonly release: () => void
}

/** The connection path's surface: synchronous, called for every login. */
export interface PlayerRegistryDataPlane {
  /**
   * Adds a session at `since` (epoch ms) until its lease is released, taking a place under the server's
   * `max_players` (proxy-wide, whichever thread takes it); undefined when the server is full.
   */
  readonly admit: (server: ServerDefinition, entry: Omit<SessionEntry, "since">, since: number) => SessionLease | undefined
  /** Live sessions of one server, all threads (players being connected count too). */
  readonly countFor: (server: ServerDefinition) => number
  /**
   * The live sessions' entries this registry lists, of one server or (without `serverId`) all: on one thread every
   * session; on the main thread with workers every worker's (`track`). A read for the BungeeCord channel of the
   * packet modes (PlayerList, IPOther, UUIDOther, GetPlayerServer; workers ask the main thread), which backends'
   * plugins call now and then: it walks every session, so the hot path must not call it.
   */
  readonly sessions: (serverId?: string) => ReadonlyArray<SessionEntry>
  /**
   * Lets a packet mode's player (by UUID) onto the proxy, whichever thread holds them: `Taken` while another session
   * of that UUID is on it, until the claim's release. Proxy-wide in the shared memory, else on this thread.
   */
  readonly claimOnline: (uuid: string) => OnlineClaim
}

/**
 * The key a player's name is claimed online under (`claimOnline`), in any case: the offline-mode UUID of its lower-case
 * form (a version-3 UUID, never an account's).
 */
export const nameClaimKey = (name: string): string => offlineUuid(name.toLowerCase())

const noPlace = () => {}

/** `lease`, giving back `also` when it is released (a place under max_players, the player's place online). */
export const releasingAlso = (lease: SessionLease, also: () => void): SessionLease => ({
  ...lease,
  release: () => {
    lease.release()
    also()
  }
})

export class PlayerRegistry extends Effect.Service<PlayerRegistry>()("portal/PlayerRegistry", {
  effect: Effect.map(Effect.zip(Effect.serviceOption(SharedMemory), PubSub.sliding<PlayerEvent>(EVENT_BUFFER)), ([memory, events]) => {
    // Places under max_players: in the shared counters for servers with slots, else counted here.
    const counter: PlayerCounter | undefined = Option.getOrUndefined(memory)?.players
    const online = Option.getOrUndefined(memory)?.online
    /** Without the shared memory (one thread, in-memory tests): the UUIDs online on this thread. */
    const onlineHere = new Set<string>()
    const claimOnline = (uuid: string): OnlineClaim => {
      if (online !== undefined) return online.claim(uuid)
      const key = undashedUuid(uuid)
      if (onlineHere.has(key)) return { _tag: "Taken" }
      onlineHere.add(key)
      return { _tag: "Claimed", release: releaseOnce(() => onlineHere.delete(key)) }
    }
    // A plain Map owned by this service: sessions come and go at connection rate, and copying an immutable
    // map per connection would cost O(sessions) each time.
    const sessions = new Map<number, LiveSession>()
    const perServer = new Map<string, number>()
    /** Bytes from and to the players of sessions that have ended, per server (telemetry's bytes relayed). */
    const endedBytes = new Map<string, Float64Array>()
    /** Subscribers to `events`: with none (the usual case without the admin API), a join or leave builds no event. */
    let listening = 0

    const adjust = (serverId: string, delta: number) => {
      const next = (perServer.get(serverId) ?? 0) + delta
      if (next <= 0) perServer.delete(serverId)
      else perServer.set(serverId, next)
    }

    // A plain callback rather than a scope: a relayed session outlives the fiber that set it up, and its relay
    // releases the lease when the connection ends.
    /** A place under `max` on a server, or undefined when it is full. */
    const takePlace = (server: ServerDefinition): (() => void) | undefined => {
      const max = server.config.max_players
      const slot = server.slots?.server
      if (counter !== undefined && slot !== undefined) return counter.admit(slot, max)
      return max > 0 && (perServer.get(server.id) ?? 0) >= max ? undefined : noPlace
    }

    const admit = (server: ServerDefinition, entry: Omit<SessionEntry, "since">, since: number): SessionLease | undefined => {
      const place = takePlace(server)
      if (place === undefined) return undefined
      return releasingAlso(add(entry, since), place)
    }

    const add = (entry: Omit<SessionEntry, "since">, since: number): SessionLease => {
      const session: SessionEntry = {
        id: entry.id,
        serverId: entry.serverId,
        clientAddress: entry.clientAddress,
        clientPort: entry.clientPort,
        protocolVersion: entry.protocolVersion,
        name: entry.name,
        uuid: entry.uuid,
        since
      }
      const live: LiveSession = { entry: session, backendAddress: undefined, bytes: undefined, ender: undefined, endedBecause: undefined, joined: false }
      sessions.set(entry.id, live)
      adjust(entry.serverId, 1)
      // Released once its entry has left the map (or been replaced by a session of the same id).
      const released = () => sessions.get(entry.id) !== live
      return {
        id: entry.id,
        attachEnder: (ender) => {
          if (released()) return
          live.ender = ender
          if (live.endedBecause !== undefined) ender.end(live.endedBecause)
        },
        identify: (name, uuid) => {
          if (released()) return
          live.entry = { ...live.entry, name, uuid }
        },
        attachBackend: (backendAddress, bytes) => {
          if (released()) return
          live.backendAddress = backendAddress
          live.bytes = bytes
          if (!live.joined) {
            live.joined = true
            // Synchronous: the connection path publishes without a fiber.
            if (listening > 0) events.unsafeOffer({ _tag: "Joined", session: snapshot(live) })
          }
        },
        release: releaseOnce(() => {
          if (live.joined && listening > 0 && sessions.get(entry.id) === live) events.unsafeOffer({ _tag: "Left", session: snapshot(live) })
          if (live.bytes !== undefined) {
            const serverId = live.entry.serverId
            let total = endedBytes.get(serverId)
            if (total === undefined) endedBytes.set(serverId, (total = new Float64Array(2)))
            total[0]! += live.bytes.bytesIn()
            total[1]! += live.bytes.bytesOut()
          }
          // The meter and the ender reach the session's sockets: let go of them, since a replaced Map table may keep
          // `live` (see the note above RelayWatchdog in relay/watchdog.ts).
          live.bytes = undefined
          live.ender = undefined
          if (sessions.get(entry.id) !== live) return
          sessions.delete(entry.id)
          adjust(entry.serverId, -1)
        })
      }
    }

    const snapshot = (live: LiveSession): SessionSnapshot => ({
      ...live.entry,
      backendAddress: live.backendAddress,
      bytesIn: live.bytes?.bytesIn() ?? 0,
      bytesOut: live.bytes?.bytesOut() ?? 0
    })

    const endLive = (live: LiveSession, reason: string): void => {
      if (live.endedBecause !== undefined) return
      live.endedBecause = reason
      live.ender?.end(reason)
    }

    const dataPlane: PlayerRegistryDataPlane = {
      admit,
      claimOnline,
      sessions: (serverId) => {
        const out: Array<SessionEntry> = []
        for (const live of sessions.values()) if (serverId === undefined || live.entry.serverId === serverId) out.push(live.entry)
        return out
      },
      countFor: (server) => {
        const slot = server.slots?.server
        return counter !== undefined && slot !== undefined ? counter.count(slot) : (perServer.get(server.id) ?? 0)
      }
    }

    return {
      dataPlane,
      /**
       * Lists a session another thread admitted (its place under max_players is that thread's), until the lease is
       * released: how the main thread knows the sessions of its worker threads.
       */
      track: (entry: SessionEntry): SessionLease => add(entry, entry.since),
      list: Effect.sync(() => [...sessions.values()].map(snapshot)),
      counts: Effect.sync((): ReadonlyMap<string, number> => new Map(perServer)),
      /**
       * Bytes relayed from (`in`) and to (`out`) players per server since Portal started: the sessions that ended and
       * the live ones (a worker's as of its last report).
       */
      bytesByServer: Effect.sync((): ReadonlyMap<string, { readonly in: number; readonly out: number }> => {
        const out = new Map<string, { in: number; out: number }>()
        for (const [serverId, total] of endedBytes) out.set(serverId, { in: total[0]!, out: total[1]! })
        for (const live of sessions.values()) {
          if (live.bytes === undefined) continue
          const known = out.get(live.entry.serverId) ?? { in: 0, out: 0 }
          known.in += live.bytes.bytesIn()
          known.out += live.bytes.bytesOut()
          out.set(live.entry.serverId, known)
        }
        return out
      }),
      /** Live sessions of one server known to this registry. */
      playersOn: (serverId: string): Effect.Effect<number> => Effect.sync(() => perServer.get(serverId) ?? 0),
      total: Effect.sync(() => sessions.size),
      /**
       * Players joining and leaving from now on, for as long as the scope lives (subscribed when this runs, so nothing
       * after it returns is missed).
       */
      subscribe: Effect.acquireRelease(
        Effect.sync(() => (listening += 1)),
        () => Effect.sync(() => (listening -= 1))
      ).pipe(Effect.zipRight(PubSub.subscribe(events)), Effect.map((queue): Stream.Stream<PlayerEvent> => Stream.fromQueue(queue))),
      /**
       * Ends one session with a reason the player is shown where the protocol allows; false when no such session is
       * live. The session leaves the registry when its connection has closed.
       */
      end: (id: number, reason: string): Effect.Effect<boolean> =>
        Effect.sync(() => {
          const live = sessions.get(id)
          if (live === undefined) return false
          endLive(live, reason)
          return true
        }),
      /** Ends every live session `matches` selects; how many. */
      endWhere: (matches: (session: SessionSnapshot) => boolean, reason: string): Effect.Effect<number> =>
        Effect.sync(() => {
          let count = 0
          for (const live of [...sessions.values()]) {
            if (!matches(snapshot(live))) continue
            endLive(live, reason)
            count += 1
          }
          return count
        })
    }
  })
}) {}
