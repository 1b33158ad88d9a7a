/**
 * Development mode: the example configuration with in-memory fakes in place of the outside world. Every address
 * of every server is replaced by an embedded demo backend, so a real Minecraft client pointed at localhost sees
 * routing work with no game server installed.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type { ServerDefinition } from "../schema/decode.js"
import type { BackendAddress } from "../schema/ServerConfig.js"
import { type ConfigSnapshot, ConfigStore } from "../services/ConfigStore.js"
import type { MakeProvider, Provider } from "../services/ServerManager.js"
import { startDemoBackend } from "./dev/DemoBackend.js"

export const DevConfigStore = Layer.scoped(
  ConfigStore,
  Effect.gen(function* () {
    const base = yield* ConfigStore
    const scope = yield* Effect.scope
    const demos = new Map<string, BackendAddress>()

    const demoFor = (server: ServerDefinition, index: number) =>
      Effect.gen(function* () {
        const key = `${server.id}#${index}`
        const known = demos.get(key)
        if (known !== undefined) return known
        const weight = server.config.addresses[index]!.weight
        const address = yield* startDemoBackend({ serverId: server.id, index: index + 1, of: server.config.addresses.length }).pipe(
          Scope.extend(scope)
        )
        const backend = { ...address, weight }
        demos.set(key, backend)
        yield* Effect.logInfo(`dev: demo backend for ${server.id} (${index + 1}/${server.config.addresses.length}) on 127.0.0.1:${address.port}`)
        return backend
      })

    const withDemos = (snapshot: ConfigSnapshot) =>
      Effect.gen(function* () {
        const servers = new Map<string, ServerDefinition>()
        for (const [id, server] of snapshot.servers) {
          const addresses = yield* Effect.forEach(server.config.addresses, (_, index) => demoFor(server, index))
          // Demo backends understand plain handshakes only. A server manager stays: demoProvider plays it.
          servers.set(id, { ...server, config: { ...server.config, addresses, send_proxy_protocol: false, forwarding_mode: "none" } })
        }
        const mapped: ConfigSnapshot = { ...snapshot, servers }
        return mapped
      })

    const current = yield* SubscriptionRef.make<ConfigSnapshot>(yield* withDemos(yield* base.get))
    yield* base.changes.pipe(
      Stream.drop(1),
      Stream.mapEffect(withDemos),
      Stream.runForEach((snapshot) => SubscriptionRef.set(current, snapshot)),
      Effect.forkScoped
    )
    yield* Effect.logWarning("development mode: every server address is replaced by an embedded demo backend")
    return {
      current,
      get: SubscriptionRef.get(current),
      changes: current.changes,
      rescanServers: base.rescanServers,
      reloadGlobal: base.reloadGlobal
    }
  })
)

/** How long a demo server takes to "start", so that the sleeping and starting MOTDs can be seen. */
const DEMO_START = Duration.seconds(3)

/**
 * The server manager of development mode: starting and stopping are simulated (the demo backend always listens),
 * so wake on join, the lifecycle MOTDs and idle shutdown can be tried without a real server or panel.
 */
export const demoProvider: MakeProvider = ({ serverId, report }) =>
  Effect.sync(() => {
    const provider: Provider = {
      initial: Effect.succeed({ _tag: "Stopped", requested: false, detail: "demo server asleep" }),
      watch: Effect.never,
      start: Effect.gen(function* () {
        yield* Effect.logInfo(`dev: starting demo server ${serverId} (${Duration.format(DEMO_START)})`)
        yield* report({ _tag: "Starting", detail: "demo start" })
        yield* Effect.forkDaemon(Effect.delay(report({ _tag: "Running", detail: "demo server ready" }), DEMO_START))
      }),
      stop: report({ _tag: "Stopped", requested: true, detail: "demo server stopped" }),
      abort: Effect.void
    }
    return provider
  })
