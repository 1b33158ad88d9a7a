/**
 * BanEnforcer: a ban that comes into force removes the online players it matches at once (by address, name or
 * UUID, as the connection path would have refused them), with the ban's message where the protocol allows one.
 * Bans made through the BanStore and bans found in an edit of the ban file count alike.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { BanStore, banMessage } from "./BanStore.js"
import { PlayerRegistry } from "./PlayerRegistry.js"

export class BanEnforcer extends Effect.Service<BanEnforcer>()("portal/BanEnforcer", {
  scoped: Effect.gen(function* () {
    const bans = yield* BanStore
    const registry = yield* PlayerRegistry

    /** Ends every live session a ban in force now matches; how many. */
    const enforce = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const sessions = yield* registry.list
      let ended = 0
      for (const session of sessions) {
        const ban =
          bans.dataPlane.ipBan(session.clientAddress, now) ??
          (session.name === undefined ? undefined : bans.dataPlane.playerBan({ name: session.name, uuid: session.uuid }, now))
        if (ban === undefined) continue
        if (yield* registry.end(session.id, banMessage(ban, Math.floor(now / 1000)))) {
          ended += 1
          yield* Effect.logInfo(`removed ${session.name ?? session.clientAddress} from ${session.serverId}: banned (${ban.reason})`)
        }
      }
      return ended
    })

    const changes = yield* bans.subscribe
    yield* changes.pipe(
      Stream.filter((change) => change.added.length > 0),
      Stream.runForEach(() => enforce),
      Effect.forkScoped
    )
    return { enforce }
  })
}) {}
