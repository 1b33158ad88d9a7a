/**
 * Lifecycle: when Portal started and whether it is shutting down, for what reports on Portal itself (the admin API's
 * `/health` and `/proxy`). `drainNotice` is placed after the Listener in the wiring so that its finalizer runs first:
 * the shutdown is visible while live connections drain.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"

export class Lifecycle extends Effect.Service<Lifecycle>()("portal/Lifecycle", {
  effect: Effect.gen(function* () {
    const startedAt = yield* Clock.currentTimeMillis
    const stopping = yield* Ref.make(false)
    return {
      /** Epoch milliseconds. */
      startedAt,
      shuttingDown: Ref.get(stopping),
      beginShutdown: Ref.set(stopping, true)
    }
  })
}) {
  /** Marks the shutdown as begun when its scope closes. */
  static readonly drainNotice = Layer.scopedDiscard(
    Effect.flatMap(Lifecycle, (lifecycle) => Effect.addFinalizer(() => lifecycle.beginShutdown))
  )
}
