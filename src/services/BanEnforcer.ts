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

    /** Ends every live session a ban in force now matches, except those in `ended`, which it adds them to. */
    const endBanned = (ended: Set<number>) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const sessions = yield* registry.list
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

    const changes = yield* bans.subscribe
    yield* changes.pipe(
      Stream.filter((change) => change.added.length > 0),
      // A session ended the first time is still listed until its connection has closed: not ended (or logged) twice.
      Stream.runForEach(() =>
        Effect.suspend(() => endBanned(new Set())).pipe(Effect.tap(() => Effect.sleep(LATE_SESSIONS)), Effect.flatMap(endBanned))
      ),
      Effect.forkScoped
    )
    return { enforce }
  })
}) {}
