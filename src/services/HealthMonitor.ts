/**
 * HealthMonitor: `[active_health]` probes of every backend address (a TCP connect, or a real status request), every
 * `interval` while healthy and every `unhealthy_interval` while not, each bounded by `timeout`, with at most
 * `max_concurrent` probes in flight (globally, and per server when a server overrides it). Verdicts go to the
 * Balancer: unhealthy addresses are tried last, a recovered one ramps up under slow start, and a server whose every
 * address is down is shown `unreachable`.
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberMap from "effect/FiberMap"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Stream from "effect/Stream"
import type { ServerDefinition } from "../schema/decode.js"
import { type ActiveHealth } from "../schema/GlobalConfig.js"
import { formatHostPort } from "../schema/HostPort.js"
import type { BackendAddress } from "../schema/ServerConfig.js"
import { encodeHandshake, NEXT_STATE_STATUS } from "../protocol/handshake.js"
import { encodeProxyV2Local } from "../protocol/proxyProtocol.js"
import { Balancer } from "./Balancer.js"
import { ConfigStore } from "./ConfigStore.js"
import { ServerManager } from "./ServerManager.js"
import { connectTo, fetchBackendStatus, StatusFetchError } from "./status/backendStatus.js"

/** Protocol number used in probe handshakes; any server answers a status request whatever the number. */
const PROBE_PROTOCOL = 47

/** The global block with the server's overrides applied. */
export const effectiveHealth = (global: ActiveHealth, server: ServerDefinition): ActiveHealth => {
  const own = server.config.active_health ?? {}
  return {
    enabled: own.enabled ?? global.enabled,
    kind: own.kind ?? global.kind,
    interval: own.interval ?? global.interval,
    unhealthy_interval: own.unhealthy_interval ?? global.unhealthy_interval,
    timeout: own.timeout ?? global.timeout,
    max_concurrent: own.max_concurrent ?? global.max_concurrent
  }
}

/**
 * One probe; fails with the reason the address is considered down. `tcp` connects; `status_ping` makes the same
 * status request as a ping does (see status/backendStatus.ts), so an answer that is not a status JSON object is a
 * failed probe. The whole probe is bounded by `timeout`.
 */
export const probe = (server: ServerDefinition, address: BackendAddress, settings: ActiveHealth): Effect.Effect<void, StatusFetchError> => {
  const timeoutMs = Duration.toMillis(settings.timeout)
  const connect = connectTo(address, timeoutMs)
  const attempt: Effect.Effect<unknown, StatusFetchError> =
    settings.kind === "tcp"
      ? Effect.scoped(connect)
      : fetchBackendStatus({
          connect,
          opening: () => {
            const host = server.config.domains.find((domain) => !domain.startsWith("*.")) ?? address.host
            const handshake = encodeHandshake({ protocolVersion: PROBE_PROTOCOL, address: host, port: address.port, nextState: NEXT_STATE_STATUS })
            return Effect.succeed(server.config.send_proxy_protocol ? [encodeProxyV2Local(), handshake] : [handshake])
          },
          readTimeoutMs: timeoutMs
        })
  return attempt.pipe(
    Effect.asVoid,
    Effect.timeoutFail({
      duration: settings.timeout,
      onTimeout: () =>
        new StatusFetchError({ reason: "timeout", detail: `no answer within ${Duration.format(settings.timeout)}`, address: formatHostPort(address) })
    })
  )
}

/** An address passing or failing its probes after doing the opposite (the first failure counts: addresses start up). */
export interface HealthChange {
  readonly serverId: string
  readonly address: string
  readonly healthy: boolean
  /** Why a probe failed; absent when the address is up again. */
  readonly reason?: string
}

/** Why a probe failed, in words; a defect (a bug) fails the probe too rather than ending the loop. */
const failureOf = (cause: Cause.Cause<StatusFetchError>): string =>
  Option.match(Cause.failureOption(cause), {
    onSome: (error) => error.message,
    onNone: () => `the probe failed: ${String(Cause.squash(cause))}`
  })

export class HealthMonitor extends Effect.Service<HealthMonitor>()("portal/HealthMonitor", {
  scoped: Effect.gen(function* () {
    const store = yield* ConfigStore
    const balancer = yield* Balancer
    const manager = yield* Effect.serviceOption(ServerManager)
    const probes = yield* FiberMap.make<string>()
    let globalSize = (yield* store.get).global.active_health.max_concurrent
    const globalLimit = yield* Effect.makeSemaphore(globalSize)
    const serverLimits = new Map<string, { readonly size: number; readonly semaphore: Effect.Semaphore }>()
    /** What each probe loop was started with, to restart it when its settings change. */
    const running = new Map<string, string>()
    const changes = yield* PubSub.sliding<HealthChange>(1024)

    const limitFor = (serverId: string, size: number) =>
      Effect.gen(function* () {
        const known = serverLimits.get(serverId)
        if (known !== undefined && known.size === size) return known.semaphore
        const semaphore = yield* Effect.makeSemaphore(size)
        serverLimits.set(serverId, { size, semaphore })
        return semaphore
      })

    /**
     * Why failed probes of `server` are expected, or undefined when they are news: a managed server that is not meant
     * to be up (sleeping, starting, stopped), or one a reload has just added whose manager has not reported yet.
     */
    const expectedDown = (server: ServerDefinition): string | undefined => {
      if (Option.isNone(manager)) return undefined
      const plane = manager.value.dataPlane
      if (!plane.manages(server.id)) return server.config.server_manager === undefined ? undefined : "its server manager has not reported yet"
      const state = plane.stateOf(server.id)
      return state === "online" ? undefined : `the server is ${state}`
    }

    const loop = (server: ServerDefinition, address: BackendAddress, settings: ActiveHealth, limit: Effect.Semaphore) =>
      Effect.gen(function* () {
        let healthy = true
        // Whether the last "down" was a warning: coming back after an expected outage (a wake) is not news either.
        let warned = false
        const name = `${server.id} ${formatHostPort(address)}`
        const round = Effect.gen(function* () {
          const result = yield* probe(server, address, settings).pipe(limit.withPermits(1), globalLimit.withPermits(1), Effect.exit)
          const nowHealthy = Exit.isSuccess(result)
          if (nowHealthy !== healthy) {
            // A managed server that is not meant to be up fails its probes as expected: a debug line, not a warning
            // each time it sleeps, nor an "up again" each time it wakes; the event says why it was expected.
            const expected = nowHealthy ? undefined : expectedDown(server)
            const failure = Exit.isSuccess(result) ? "" : failureOf(result.cause)
            const change: HealthChange = nowHealthy
              ? { serverId: server.id, address: formatHostPort(address), healthy: true }
              : { serverId: server.id, address: formatHostPort(address), healthy: false, reason: expected === undefined ? failure : `${failure}; ${expected}` }
            if (nowHealthy) yield* warned ? Effect.logInfo(`health: ${name} is up again`) : Effect.logDebug(`health: ${name} is up again`)
            else if (expected === undefined) yield* Effect.logWarning(`health: ${name} is down (${failure})`)
            else yield* Effect.logDebug(`health: ${name} is down (${failure}); ${expected}`)
            warned = !nowHealthy && expected === undefined
            yield* PubSub.publish(changes, change)
          }
          healthy = nowHealthy
          yield* balancer.setHealth(server, address, healthy)
        })
        for (;;) {
          // A bug in one round must not end the loop in silence: the address would keep its last verdict for good.
          yield* round.pipe(
            Effect.catchAllCause((cause) =>
              Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : Effect.logError(`health: the probe loop of ${name} failed unexpectedly`, cause)
            )
          )
          yield* Effect.sleep(healthy ? settings.interval : settings.unhealthy_interval)
        }
      })

    /** Starts, restarts and stops probe loops so that they match the configuration. */
    const reconcile = Effect.gen(function* () {
      const snapshot = yield* store.get
      // [active_health] applies on SIGHUP like the rest of proxy.toml: the bound across all probes too.
      if (snapshot.global.active_health.max_concurrent !== globalSize) {
        globalSize = snapshot.global.active_health.max_concurrent
        yield* globalLimit.resize(globalSize)
      }
      const wanted = new Map<string, { server: ServerDefinition; address: BackendAddress; settings: ActiveHealth }>()
      for (const server of snapshot.servers.values()) {
        const settings = effectiveHealth(snapshot.global.active_health, server)
        if (!settings.enabled) continue
        for (const address of server.config.addresses) {
          wanted.set(`${server.id}|${formatHostPort(address)}`, { server, address, settings })
        }
      }
      for (const key of [...running.keys()]) {
        if (!wanted.has(key)) {
          running.delete(key)
          yield* FiberMap.remove(probes, key)
          const [serverId] = key.split("|")
          const server = snapshot.servers.get(serverId!)
          const address = server?.config.addresses.find((a) => `${server.id}|${formatHostPort(a)}` === key)
          // An address no longer probed is trusted again rather than kept down by a stale verdict.
          if (server !== undefined && address !== undefined) yield* balancer.setHealth(server, address, true)
        }
      }
      for (const [key, { server, address, settings }] of wanted) {
        const signature = JSON.stringify({ settings: { ...settings, interval: Duration.toMillis(settings.interval), unhealthy: Duration.toMillis(settings.unhealthy_interval), timeout: Duration.toMillis(settings.timeout) }, domains: server.config.domains, proxy: server.config.send_proxy_protocol })
        if (running.get(key) === signature) continue
        running.set(key, signature)
        const limit = yield* limitFor(server.id, settings.max_concurrent)
        yield* FiberMap.run(probes, key, loop(server, address, settings, limit))
      }
    })

    yield* reconcile
    yield* store.changes.pipe(Stream.runForEach(() => reconcile), Effect.forkScoped)
    return {
      probing: Effect.sync(() => [...running.keys()]),
      /** Health changes from now on, for as long as the scope lives (subscribed when this runs). */
      subscribe: Effect.map(PubSub.subscribe(changes), (queue): Stream.Stream<HealthChange> => Stream.fromQueue(queue))
    }
  })
}) {}
