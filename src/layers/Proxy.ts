/**
 * The proxy's services wired together, given a ConfigStore and the platform. Each service is built once here;
 * production (Main) and development (Dev) differ only in the ConfigStore and the server-manager providers.
 */
import * as Layer from "effect/Layer"
import { Backend } from "../services/Backend.js"
import { Balancer } from "../services/Balancer.js"
import { BanStore } from "../services/BanStore.js"
import { Forwarding } from "../services/Forwarding.js"
import { HealthMonitor } from "../services/HealthMonitor.js"
import { IpFilter } from "../services/IpFilter.js"
import { Listener } from "../services/Listener.js"
import { PlayerRegistry } from "../services/PlayerRegistry.js"
import { RateLimiter } from "../services/RateLimiter.js"
import { Relay } from "../services/Relay.js"
import { Router } from "../services/Router.js"
import { ServerManager, type ServerManagerOptions } from "../services/ServerManager.js"
import { Session } from "../services/Session.js"
import { StatusService } from "../services/StatusService.js"

const State = Layer.mergeAll(PlayerRegistry.Default, Balancer.Default, Relay.Default)

/** Every service of the proxy plus the listener; accepting starts when this layer is built. */
export const makeProxyLayer = (options: { readonly serverManager?: ServerManagerOptions } = {}) => {
  const Edges = Layer.mergeAll(
    Backend.Default,
    Forwarding.Default,
    Router.Default,
    RateLimiter.Default,
    IpFilter.Default,
    BanStore.Default,
    HealthMonitor.Default,
    ServerManager.Default(options.serverManager)
  ).pipe(Layer.provideMerge(State))
  const Answers = StatusService.Default.pipe(Layer.provideMerge(Edges))
  const Sessions = Session.Default.pipe(Layer.provideMerge(Answers))
  return Listener.Default.pipe(Layer.provideMerge(Sessions))
}

export const ProxyLayer = makeProxyLayer()
