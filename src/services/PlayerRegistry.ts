/**
 * PlayerRegistry: every live session (from routing to close) and the player counts derived from them.
 * Byte counters are read from the sockets on demand, so the relay pays nothing per chunk.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"

export interface SessionByteSource {
  /** Bytes received from the player so far. */
  readonly bytesIn: () => number
  /** Bytes sent to the player so far. */
  readonly bytesOut: () => number
}

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

interface LiveSession {
  readonly entry: SessionEntry
  backendAddress: string | undefined
  bytes: SessionByteSource | undefined
}

/** A session's place in the registry; `release` removes it (idempotent). */
export interface SessionLease {
  readonly id: number
  /** Records the backend address once connected, and where the byte counts come from. */
  readonly attachBackend: (backendAddress: string, bytes: SessionByteSource) => void
  readonly release: () => void
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

    /**
     * Adds a session until its lease is released. A plain callback rather than a scope: a relayed session outlives
     * the fiber that set it up, and its relay releases the lease when the connection ends.
     */
    /** `add` at `since` (epoch ms), synchronously: this runs for every login. */
    const addAt = (entry: Omit<SessionEntry, "since">, since: number): SessionLease => {
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
      const live: LiveSession = { entry: session, backendAddress: undefined, bytes: undefined }
      sessions.set(entry.id, live)
      adjust(entry.serverId, 1)
      let released = false
      return {
        id: entry.id,
        attachBackend: (backendAddress, bytes) => {
          if (released) return
          live.backendAddress = backendAddress
          live.bytes = bytes
        },
        release: () => {
          if (released) return
          released = true
          // The byte source reaches the session's sockets: let go of it, since a replaced Map table may keep `live`
          // (see the note above RelayWatchdog in Relay.ts).
          live.bytes = undefined
          if (sessions.delete(entry.id)) adjust(entry.serverId, -1)
        }
      }
    }

    const add = (entry: Omit<SessionEntry, "since">): Effect.Effect<SessionLease> =>
      Effect.map(Clock.currentTimeMillis, (since) => addAt(entry, since))

    /** Adds a session for the life of the current scope. */
    const register = (entry: Omit<SessionEntry, "since">): Effect.Effect<SessionLease, never, Scope.Scope> =>
      Effect.acquireRelease(add(entry), (lease) => Effect.sync(lease.release))

    const snapshot = (live: LiveSession): SessionSnapshot => ({
      ...live.entry,
      backendAddress: live.backendAddress,
      bytesIn: live.bytes?.bytesIn() ?? 0,
      bytesOut: live.bytes?.bytesOut() ?? 0
    })

    return {
      add,
      addAt,
      register,
      list: Effect.sync(() => [...sessions.values()].map(snapshot)),
      /** Live sessions of one server (players being connected count too, so simultaneous joins respect max_players). */
      countFor: (serverId: string) => Effect.sync(() => perServer.get(serverId) ?? 0),
      /** `countFor`, synchronously. */
      countForNow: (serverId: string): number => perServer.get(serverId) ?? 0,
      counts: Effect.sync((): ReadonlyMap<string, number> => new Map(perServer)),
      total: Effect.sync(() => sessions.size)
    }
  })
}) {}
