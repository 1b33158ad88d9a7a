/** The production wiring: every service built once, at the top. */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as NodeCommandExecutor from "@effect/platform-node/NodeCommandExecutor"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { availableParallelism } from "node:os"
import { ConfigStore } from "../services/ConfigStore.js"
import { configStoreFromFiles } from "../services/config/fileStore.js"
import { ServerSource } from "../services/config/ServerSource.js"
import { ContainersLayer } from "./Containers.js"
import { DevConfigStore, demoProvider } from "./Dev.js"
import type { Backend } from "../services/Backend.js"
import type { Balancer } from "../services/Balancer.js"
import type { BanEnforcer } from "../services/BanEnforcer.js"
import type { BanStore } from "../services/BanStore.js"
import type { Forwarding } from "../services/Forwarding.js"
import type { HealthMonitor } from "../services/HealthMonitor.js"
import type { ListeningAddress } from "../services/listener/listen.js"
import type { PlayerRegistry } from "../services/PlayerRegistry.js"
import type { RateLimiter } from "../services/RateLimiter.js"
import type { ServerManager } from "../services/ServerManager.js"
import { SharedMemory } from "../services/SharedMemory.js"
import type { StatusService } from "../services/StatusService.js"
import type { WorkerPoolOptions } from "../services/WorkerPool.js"
import { workerThreadsUnsupported } from "../services/workers/listening.js"
import { makeControlLayer, makeProxyLayer } from "./Proxy.js"
import { logStartup } from "./Startup.js"

export interface MainOptions {
  readonly configFile: string
  /** Development mode: embedded demo backends replace every configured address. */
  readonly dev: boolean
  /** How worker threads log (as the main thread does). */
  readonly log?: WorkerPoolOptions["log"]
}

/** The worker threads `worker_threads` asks for (0: one per core); 1 runs the data plane on the main thread. */
export const requestedWorkers = (workerThreads: number): number => (workerThreads === 0 ? availableParallelism() : workerThreads)

export const Platform = Layer.mergeAll(
  NodeFileSystem.layer,
  FetchHttpClient.layer,
  NodeCommandExecutor.layer.pipe(Layer.provide(NodeFileSystem.layer))
)

/** What the main thread's services are, with or without worker threads. */
type MainThreadServices =
  | ListeningAddress
  | PlayerRegistry
  | BanStore
  | BanEnforcer
  | ServerManager
  | StatusService
  | Balancer
  | RateLimiter
  | HealthMonitor
  | Backend
  | Forwarding

const DEFAULT_WORKER_LOG: WorkerPoolOptions["log"] = { format: "pretty", level: "info", colors: false }

/** Logs what was loaded before the listener starts. */
const Announce = Layer.effectDiscard(Effect.flatMap(ConfigStore, (store) => Effect.flatMap(store.get, logStartup)))

export const MainLayer = (options: MainOptions) => {
  // ConfigStore merges the servers of a ServerSource; discovery (when configured) fills it.
  const base = ContainersLayer.pipe(
    Layer.provideMerge(configStoreFromFiles({ configFile: options.configFile })),
    Layer.provideMerge(ServerSource.layer)
  )
  const config = (options.dev ? DevConfigStore.pipe(Layer.provide(base)) : base).pipe(Layer.provideMerge(Platform))
  const proxyOptions = options.dev ? { serverManager: { makeProvider: demoProvider } } : {}
  // One thread, or the data plane on worker threads: decided once, from the configuration loaded at start.
  const planes = Layer.unwrapEffect(
    Effect.gen(function* () {
      const snapshot = yield* (yield* ConfigStore).get
      const wanted = requestedWorkers(snapshot.global.worker_threads)
      // Where workers cannot share the address, one thread (the startup log says why: config/features.ts).
      const workers = wanted > 1 && workerThreadsUnsupported() === undefined ? wanted : 1
      // The state shared by the data plane's threads, and the configuration as they see it: each server's slots in it.
      const shared = SharedMemory.slotting.pipe(Layer.provideMerge(SharedMemory.layer(workers)))
      // The services of both: what the main thread offers whichever thread runs the data plane.
      const plane: Layer.Layer<MainThreadServices, Layer.Layer.Error<ReturnType<typeof makeProxyLayer>> | Layer.Layer.Error<ReturnType<typeof makeControlLayer>>, Layer.Layer.Context<ReturnType<typeof makeProxyLayer>> | Layer.Layer.Context<ReturnType<typeof makeControlLayer>>> =
        workers > 1
          ? makeControlLayer({ ...proxyOptions, workers: { workers, log: options.log ?? DEFAULT_WORKER_LOG } })
          : makeProxyLayer(proxyOptions)
      return plane.pipe(Layer.provideMerge(Announce), Layer.provideMerge(shared))
    })
  )
  return planes.pipe(Layer.provideMerge(config))
}
