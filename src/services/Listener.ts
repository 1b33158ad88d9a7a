/**
 * Listener: the main thread's listening socket when it runs the data plane itself (`worker_threads = 1`): every
 * connection goes to this thread's Session (listener/listen.ts does the accepting).
 */
import * as Effect from "effect/Effect"
import { formatHostPort } from "../schema/HostPort.js"
import { ConfigStore } from "./ConfigStore.js"
import { listen } from "./listener/listen.js"
import { Relay } from "./Relay.js"
import { Session } from "./Session.js"
import { Stats } from "./Stats.js"

export { ListenError, shutdownGrace } from "./listener/listen.js"

export class Listener extends Effect.Service<Listener>()("portal/Listener", {
  scoped: Effect.gen(function* () {
    const session = yield* Session
    const stats = (yield* Stats).dataPlane
    const listening = yield* listen({
      handle: session.handle,
      store: yield* ConfigStore,
      relay: yield* Relay,
      onRefused: () => stats.rejected("max_connections")
    })
    yield* Effect.logInfo(`listening on ${formatHostPort(listening.address)}`)
    return listening
  })
}) {}
