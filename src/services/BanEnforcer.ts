/**
 * BanEnforcer: a ban that comes into force removes the online players it matches at once (by address, name or
 * UUID, as the connection path would have refused them), with the ban's message where the protocol allows one.
 * Bans made through the BanStore and bans found in an edit of the ban file count alike.
 *
 * With worker threads the registry learns of a worker's sessions in batches (layers/Worker.ts), so a player a worker
 * admitted just before the ban reached it can be listed a few milliseconds after the ban came in: each ban change is
 * enforced again `LATE_SESSIONS` later, by then the worker refuses such a player itself.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { BanStore, banMessage } from "./BanStore.js"
import { PlayerRegistry } from "./PlayerRegistry.js"

/** How long after a ban change it is enforced a second time: far longer than a worker's batches take to arrive. */
export const LATE_SESSIONS = Duration.millis(250)

export class BanEnforcer extends Effect.Service<BanEnforcer>()("portal/BanEnforcer", {
  scoped: Effect.gen(function* () {
    const bans = yield* BanStore
    const registry = yield* PlayerRegistry

    /**
     * Ends every live session a ban in force now matches, except those in `ended`, which it adds them to (and from
     * which it drops the sessions no longer listed).
     */
    const endBanned = (ended: Set<number>) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const sessions = yield* registry.list
        const listed = new Set(sessions.map((session) => session.id))
        for (const id of ended) if (!listed.has(id)) ended.delete(id)
        for (const session of sessions) {
          if (ended.has(session.id)) continue
          const ban =
            bans.dataPlane.ipBan(session.clientAddress, now) ??
            (session.name === undefined ? undefined : bans.dataPlane.playerBan({ name: session.name, uuid: session.uuid }, now))
          if (ban === undefined) continue
          if (yield* registry.end(session.id, banMessage(ban, Math.floor(now / 1000)))) {
            ended.add(session.id)
            yield* Effect.logInfo(`removed ${session.name ?? session.clientAddress} from ${session.serverId}: banned (${ban.reason})`)
          }
        }
        return ended
      })

    /** Ends every live session a ban in force now matches; how many. */
    const enforce = Effect.map(
      Effect.suspend(() => endBanned(new Set())),
      (ended) => ended.size
    )

    // The sessions the enforcer ended that are still listed (their connections closing): not ended, nor logged, twice.
    const ended = new Set<number>()
    const scope = yield* Effect.scope
    const changes = yield* bans.subscribe
    yield* changes.pipe(
      Stream.filter((change) => change.added.length > 0),
      // The second look runs on its own, so that a burst of changes is enforced without waiting on it.
      Stream.runForEach(() =>
        endBanned(ended).pipe(Effect.zipRight(Effect.forkIn(Effect.zipRight(Effect.sleep(LATE_SESSIONS), endBanned(ended)), scope)))
      ),
      Effect.forkScoped
    )
    return { enforce }
  })
}) {}
