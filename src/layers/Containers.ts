/**
 * Container discovery in the running proxy, only when `proxy.toml` has `[containers]`: the discovery module is
 * loaded then, and nothing is loaded or contacted otherwise. Its servers reach ConfigStore through ServerSource.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ConfigStore } from "../services/ConfigStore.js"

export const ContainersLayer = Layer.unwrapEffect(
  Effect.gen(function* () {
    const store = yield* ConfigStore
    const snapshot = yield* store.get
    if (snapshot.global.containers === undefined) return Layer.empty
    const { ContainerDiscoveryLive } = yield* Effect.promise(() => import("../services/ContainerDiscovery.js"))
    return ContainerDiscoveryLive
  })
)
