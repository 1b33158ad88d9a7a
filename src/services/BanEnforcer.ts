/**
 * BanEnforcer: a ban that comes into force removes the online players it matches at once (by address, name or
 * UUID, as the connection path would have refused them), with the ban's message where the protocol allows one.
 * Bans made through the BanStore and bans found in an edit of the ban file count alike.
 *
 * The thread that relays the players enforces: on one thread this service, with worker threads each worker when its
 * copy of the bans changes (layers/Worker.ts, with bans/endBanned.ts). A worker handles its messages one at a time, so a
 * player it admits is either checked against the new bans at admission or listed when they arrive, however late the
 * main thread hears of the session. The main thread (`BanEnforcer.layerWithWorkers`) then only lists the sessions.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { BanStore } from "./BanStore.js"
import { endBannedSessions } from "./bans/endBanned.js"
import { PlayerRegistry } from "./PlayerRegistry.js"

/** `enforce`: ends every live session of `registry` a ban in force now matches; how many. */
const enforceNow = (registry: PlayerRegistry, bans: BanStore): Effect.Effect<number> =>
  Effect.map(
    Effect.suspend(() => endBannedSessions(registry, bans.dataPlane, new Set())),
    (ended) => ended.size
  )

export class BanEnforcer extends Effect.Service<BanEnforcer>()("portal/BanEnforcer", {
  scoped: Effect.gen(function* () {
    const bans = yield* BanStore
    const registry = yield* PlayerRegistry

    // The sessions the enforcer ended that are still listed (their connections closing): not ended, nor logged, twice.
    const ended = new Set<number>()
    const changes = yield* bans.subscribe
    yield* changes.pipe(
      Stream.filter((change) => change.added.length > 0),
      Stream.runForEach(() => endBannedSessions(registry, bans.dataPlane, ended)),
      Effect.forkScoped
    )
    return { enforce: enforceNow(registry, bans) }
  })
}) {
  /**
   * The main thread's while worker threads relay the players: they enforce (each on its own sessions, as the bans
   * reach it); `enforce` here ends what the registry lists, for a caller that asks.
   */
  static readonly layerWithWorkers = Layer.effect(
    BanEnforcer,
    Effect.gen(function* () {
      const bans = yield* BanStore
      const registry = yield* PlayerRegistry
      return BanEnforcer.make({ enforce: enforceNow(registry, bans) })
    })
  )
}
