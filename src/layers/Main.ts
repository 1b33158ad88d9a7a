/** The production wiring: every service built once, at the top. */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as NodeCommandExecutor from "@effect/platform-node/NodeCommandExecutor"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ConfigStore } from "../services/ConfigStore.js"
import { configStoreFromFiles } from "../services/config/fileStore.js"
import { ServerSource } from "../services/config/ServerSource.js"
import { ContainersLayer } from "./Containers.js"
import { DevConfigStore, demoProvider } from "./Dev.js"
import { SharedMemory } from "../services/SharedMemory.js"
import { makeProxyLayer } from "./Proxy.js"
import { logStartup } from "./Startup.js"

export interface MainOptions {
  readonly configFile: string
  /** Development mode: embedded demo backends replace every configured address. */
  readonly dev: boolean
}

export const Platform = Layer.mergeAll(
  NodeFileSystem.layer,
  FetchHttpClient.layer,
  NodeCommandExecutor.layer.pipe(Layer.provide(NodeFileSystem.layer))
)

/** Logs what was loaded before the listener starts. */
const Announce = Layer.effectDiscard(Effect.flatMap(ConfigStore, (store) => Effect.flatMap(store.get, logStartup)))

export const MainLayer = (options: MainOptions) => {
  // ConfigStore merges the servers of a ServerSource; discovery (when configured) fills it.
  const base = ContainersLayer.pipe(
    Layer.provideMerge(configStoreFromFiles({ configFile: options.configFile })),
    Layer.provideMerge(ServerSource.layer)
  )
  const config = (options.dev ? DevConfigStore.pipe(Layer.provide(base)) : base).pipe(Layer.provideMerge(Platform))
  // The state shared by the data plane's threads, and the configuration as they see it: with each server's slots in it.
  const shared = SharedMemory.slotting.pipe(Layer.provideMerge(SharedMemory.layer(1)), Layer.provideMerge(config))
  const proxy = makeProxyLayer(options.dev ? { serverManager: { makeProvider: demoProvider } } : {})
  return proxy.pipe(Layer.provideMerge(Announce), Layer.provideMerge(shared))
}
