/** The production wiring: every service built once, at the top. */
import { FetchHttpClient } from "@effect/platform"
import { NodeFileSystem } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { ConfigStore } from "../services/ConfigStore.js"
import { logStartup } from "./Startup.js"

export interface MainOptions {
  readonly configFile: string
  readonly dev: boolean
}

const Platform = Layer.merge(NodeFileSystem.layer, FetchHttpClient.layer)

export const MainLayer = (options: MainOptions) => {
  const config = ConfigStore.layer({ configFile: options.configFile }).pipe(Layer.provide(Platform))
  const announce = Layer.effectDiscard(Effect.flatMap(ConfigStore, (store) => Effect.flatMap(store.get, logStartup)))
  return announce.pipe(Layer.provideMerge(config))
}
