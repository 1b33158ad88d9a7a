/**
 * The proxy's services wired together, given a ConfigStore and the platform. Each service is built once here;
 * production (Main) and development (Dev) differ only in the ConfigStore and the server-manager providers.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Backend } from "../services/Backend.js"
import { BanEnforcer } from "../services/BanEnforcer.js"
import { Balancer } from "../services/Balancer.js"
import { BanStore, type BanStoreError } from "../services/BanStore.js"
import { Forwarding } from "../services/Forwarding.js"
import { HealthMonitor } from "../services/HealthMonitor.js"
import { IpFilter } from "../services/IpFilter.js"
import { Lifecycle } from "../services/Lifecycle.js"
import { Listener } from "../services/Listener.js"
import { ListeningAddress } from "../services/listener/listen.js"
import { PlayerRegistry } from "../services/PlayerRegistry.js"
import { RateLimiter } from "../services/RateLimiter.js"
import { Relay } from "../services/Relay.js"
import { Router } from "../services/Router.js"
import { ServerManager, type ServerManagerOptions } from "../services/ServerManager.js"
import { Session } from "../services/Session.js"
import { Stats } from "../services/Stats.js"
import { StatusService } from "../services/StatusService.js"
import { WorkerCensus, WorkerPool, type WorkerPoolOptions } from "../services/WorkerPool.js"
import { TelemetryLayer } from "./Telemetry.js"
import { WebLayer } from "./Web.js"

/** What a proxy layer can be built with besides its defaults (development mode, tests). */
export interface ProxyOptions {
  readonly serverManager?: ServerManagerOptions
  /** The ban store in place of the file-backed one (tests: `BanStore.layerMemory()`). */
  readonly bans?: Layer.Layer<BanStore, BanStoreError>
  /** The backend dialer in place of TCP (tests: `Backend.layerTest(connector)`). */
  readonly backend?: Layer.Layer<Backend, never, Balancer>
}

/** State every configuration of the main thread has: the registry, the balancer's view, the stats. */
const MainState = Layer.mergeAll(PlayerRegistry.Default, Balancer.Default, Stats.Default)

/** The control plane's services (whichever thread relays players): bans, server managers, health checks, dialing. */
const controlServices = (options: ProxyOptions) =>
  Layer.mergeAll(
    options.backend ?? Backend.Default,
    Forwarding.Default,
    RateLimiter.Default,
    options.bans ?? BanStore.Default,
    // The health checks read the managers' states: a sleeping server's failed probes are expected.
    HealthMonitor.Default.pipe(Layer.provideMerge(ServerManager.Default(options.serverManager)))
  )

/** The status cache and the ban enforcement on top of the rest (with workers, each worker enforces on its players). */
const withAnswers = <A, E, R>(edges: Layer.Layer<A, E, R>, enforcer: typeof BanEnforcer.Default = BanEnforcer.Default) =>
  Layer.merge(StatusService.Default, enforcer).pipe(Layer.provideMerge(edges))

/**
 * Every service of the connection path, up to Session; nothing listens yet. Telemetry reads the services' counters and
 * takes the connections' traces; it stops after the listener has drained.
 */
export const makeSessionLayer = (options: ProxyOptions = {}) =>
  Session.Default.pipe(
    Layer.provideMerge(TelemetryLayer),
    Layer.provideMerge(
      withAnswers(
        Layer.mergeAll(controlServices(options), Router.Default, IpFilter.Default).pipe(Layer.provideMerge(Layer.merge(MainState, Relay.Default)))
      )
    )
  )

/**
 * Every service of the proxy, the web admin server when `[web]` is configured, then the listener; accepting starts
 * when this layer is built. Shutdown runs the other way: the shutdown is noted (the admin API's health turns 503),
 * the listener drains while the admin API still answers, then the web server and the services stop.
 */
export const makeProxyLayer = (options: ProxyOptions = {}) => {
  const listener = Lifecycle.drainNotice.pipe(
    Layer.provideMerge(Listener.Default),
    Layer.provideMerge(WebLayer),
    Layer.provideMerge(makeSessionLayer(options)),
    Layer.provideMerge(Lifecycle.Default)
  )
  return Layer.effect(ListeningAddress, Effect.map(Listener, (listening) => listening.address)).pipe(Layer.provideMerge(listener))
}

/**
 * The main thread's services when worker threads run the data plane: the control plane (configuration, bans,
 * server managers, health checks, the status cache, the registry of every worker's sessions) and the worker pool.
 */
export const makeControlLayer = (options: ProxyOptions & { readonly workers: WorkerPoolOptions }) => {
  const pool = Lifecycle.drainNotice.pipe(
    Layer.provideMerge(WorkerPool.layer(options.workers)),
    Layer.provideMerge(WebLayer),
    Layer.provideMerge(TelemetryLayer),
    Layer.provideMerge(withAnswers(controlServices(options).pipe(Layer.provideMerge(MainState)), BanEnforcer.layerWithWorkers)),
    Layer.provideMerge(Layer.merge(Lifecycle.Default, WorkerCensus.layer))
  )
  return Layer.effect(ListeningAddress, Effect.map(WorkerPool, (workers) => workers.address)).pipe(Layer.provideMerge(pool))
}

export const ProxyLayer = makeProxyLayer()
