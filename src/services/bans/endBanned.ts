/**
 * Ending the live sessions that bans in force match, on whichever thread relays them (BanEnforcer on one thread, each
 * worker with worker threads). Loads nothing but Effect: workers use it.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { BanDataPlane } from "../BanStore.js"
import type { PlayerRegistry } from "../PlayerRegistry.js"
import { banMessage } from "./message.js"

/** What ending banned sessions reads and ends: a registry of live sessions. */
export interface BannedSessionsRegistry {
  readonly list: PlayerRegistry["list"]
  readonly end: PlayerRegistry["end"]
}

/**
 * Ends every live session of `registry` a ban in force now matches, except those in `ended`, which it adds them to
 * (and from which it drops the sessions no longer listed): a session whose connection is still closing is not ended,
 * nor logged, twice.
 */
export const endBannedSessions = (registry: BannedSessionsRegistry, bans: BanDataPlane, ended: Set<number>) =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const sessions = yield* registry.list
    const listed = new Set(sessions.map((session) => session.id))
    for (const id of ended) if (!listed.has(id)) ended.delete(id)
    for (const session of sessions) {
      if (ended.has(session.id)) continue
      const ban =
        bans.ipBan(session.clientAddress, now) ?? (session.name === undefined ? undefined : bans.playerBan({ name: session.name, uuid: session.uuid }, now))
      if (ban === undefined) continue
      if (yield* registry.end(session.id, banMessage(ban, Math.floor(now / 1000)))) {
        ended.add(session.id)
        yield* Effect.logInfo(`removed ${session.name ?? session.clientAddress} from ${session.serverId}: banned (${ban.reason})`)
      }
    }
    return ended
  })

