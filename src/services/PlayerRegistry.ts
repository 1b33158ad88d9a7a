/**
 * PlayerRegistry: every live login session (from admission to close), the player counts derived from them, and the
 * way to end one from outside (a kick from the admin API, a ban made while the player is online).
 * Byte counters are read from the relay on demand, so it pays nothing per chunk.
 */
import * as Effect from "effect/Effect"
import { releaseOnce } from "./once.js"
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

/** What ends a session from outside: before the relay, the login in progress; after, the relay. */
export interface SessionEnder {
  readonly end: (reason: string) => void
}

interface LiveSession {
  readonly entry: SessionEntry
  backendAddress: string | undefined
  bytes: ByteMeter | undefined
  ender: SessionEnder | undefined
  /** Set once the session was asked to end, so an ender attached later ends it at once. */
  endedBecause: string | undefined
}

/** A session's place in the registry; `release` removes it (idempotent). */
export interface SessionLease {
  readonly id: number
  /** How to end the session from now on (replacing any ender attached before). */
  readonly attachEnder: (ender: SessionEnder) => void
  /** Records the backend address once connected, and where the byte counts come from. */
  readonly attachBackend: (backendAddress: string, bytes: ByteMeter) => void
  readonly release: () => void
}

/** The connection path's surface: synchronous, called for every login. */
export interface PlayerRegistryDataPlane {
  /** Adds a session at `since` (epoch ms) until its lease is released. */
  readonly add: (entry: Omit<SessionEntry, "since">, since: number) => SessionLease
  /** Live sessions of one server (players being connected count too, so simultaneous joins respect max_players). */
  readonly countFor: (serverId: string) => number
  /**
   * The live sessions' entries, of one server or (without `serverId`) all. A read for the BungeeCord channel of the
   * packet modes (PlayerList, IPOther, UUIDOther, GetPlayerServer), which backends' plugins call now and then: it
   * walks every session, so the hot path must not call it.
   */
  readonly sessions: (serverId?: string) => ReadonlyArray<SessionEntry>
}

export class PlayerRegistry extends Effect.Service<PlayerRegistry>()("portal/PlayerRegistry", {
  effect: Effect.sync(() => {
    // A plain Map owned by this service: sessions come and go at connection rate, and copying an immutable
    // map per connection would cost O(sessions) each time.
    const sessions = new Map<number, LiveSession>()
    const perServer = new Map<string, number>()

    const adjust = (serverId: string, delta: number) => {
      const next = (perServer.get(serverId) ?? 0) + delta
      if (next <= 0) perServer.delete(serverId)
      else perServer.set(serverId, next)
    }

    // A plain callback rather than a scope: a relayed session outlives the fiber that set it up, and its relay
    // releases the lease when the connection ends.
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
      const live: LiveSession = { entry: session, backendAddress: undefined, bytes: undefined, ender: undefined, endedBecause: undefined }
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
        attachBackend: (backendAddress, bytes) => {
          if (released()) return
          live.backendAddress = backendAddress
          live.bytes = bytes
        },
        release: releaseOnce(() => {
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
      add,
      countFor: (serverId) => perServer.get(serverId) ?? 0,
      sessions: (serverId) => {
        const out: Array<SessionEntry> = []
        for (const live of sessions.values()) if (serverId === undefined || live.entry.serverId === serverId) out.push(live.entry)
        return out
      }
    }

    return {
      dataPlane,
      list: Effect.sync(() => [...sessions.values()].map(snapshot)),
      counts: Effect.sync((): ReadonlyMap<string, number> => new Map(perServer)),
      total: Effect.sync(() => sessions.size),
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
