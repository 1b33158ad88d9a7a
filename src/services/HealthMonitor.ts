/**
 * HealthMonitor: `[active_health]` probes of every backend address (a TCP connect, or a real status request), every
 * `interval` while healthy and every `unhealthy_interval` while not, each bounded by `timeout`, with at most
 * `max_concurrent` probes in flight (globally, and per server when a server overrides it). Verdicts go to the
 * Balancer: unhealthy addresses are tried last, a recovered one ramps up under slow start, and a server whose every
 * address is down is shown `unreachable`.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Stream from "effect/Stream"
import * as net from "node:net"
import type { ServerDefinition } from "../schema/decode.js"
import { type ActiveHealth } from "../schema/GlobalConfig.js"
import { formatHostPort } from "../schema/HostPort.js"
import type { BackendAddress } from "../schema/ServerConfig.js"
import { readFrame } from "../protocol/frame.js"
import { decodeWith } from "../protocol/ProtocolError.js"
import { encodeHandshake, NEXT_STATE_STATUS } from "../protocol/handshake.js"
import { encodeProxyV2Local } from "../protocol/proxyProtocol.js"
import { decodeStatusResponseBody, MAX_STATUS_FRAME_BYTES, STATUS_REQUEST } from "../protocol/status.js"
import { Balancer } from "./Balancer.js"
import { ConfigStore } from "./ConfigStore.js"
import { done, failParse, failWith, needMore, SocketReader, writeAll } from "./net/SocketReader.js"
import { parseBackendStatus } from "./status/motd.js"

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

const connect = (address: BackendAddress) =>
  Effect.acquireRelease(
    Effect.async<net.Socket, Error>((resume) => {
      const socket = net.connect({ host: address.host, port: address.port })
      socket.once("connect", () => {
        socket.removeAllListeners("error")
        socket.on("error", () => {})
        resume(Effect.succeed(socket))
      })
      socket.once("error", (error) => resume(Effect.fail(error)))
      return Effect.sync(() => socket.destroy())
    }),
    (socket) => Effect.sync(() => socket.destroy())
  )

/** One probe; fails with the reason the address is considered down. */
export const probe = (server: ServerDefinition, address: BackendAddress, settings: ActiveHealth) =>
  Effect.scoped(
    Effect.gen(function* () {
      const socket = yield* connect(address)
      if (settings.kind === "tcp") return
      const host = server.config.domains.find((domain) => !domain.startsWith("*.")) ?? address.host
      const handshake = encodeHandshake({ protocolVersion: PROBE_PROTOCOL, address: host, port: address.port, nextState: NEXT_STATE_STATUS })
      const preamble = server.config.send_proxy_protocol ? [encodeProxyV2Local()] : []
      yield* writeAll(socket, Buffer.concat([...preamble, handshake, STATUS_REQUEST]))
      const text = yield* new SocketReader(socket).read("a status answer", MAX_STATUS_FRAME_BYTES, Duration.toMillis(settings.timeout), (buffer) => {
        const frame = readFrame(buffer, 0, MAX_STATUS_FRAME_BYTES)
        if (frame._tag === "Incomplete") return needMore
        if (frame._tag === "Invalid" || frame.packetId !== 0) return failWith("not a status answer")
        const decoded = decodeWith(() => decodeStatusResponseBody(buffer.subarray(frame.bodyStart, frame.end)))
        return decoded._tag === "Ok" ? done(decoded.value, frame.end) : failParse(decoded.error)
      })
      parseBackendStatus(text)
    })
  ).pipe(
    Effect.timeoutFail({ duration: settings.timeout, onTimeout: () => new Error(`no answer within ${Duration.format(settings.timeout)}`) }),
    Effect.mapError((error) => ((error as NodeJS.ErrnoException).code ?? (error instanceof Error ? error.message : String(error))))
  )

export class HealthMonitor extends Effect.Service<HealthMonitor>()("portal/HealthMonitor", {
  scoped: Effect.gen(function* () {
    const store = yield* ConfigStore
    const balancer = yield* Balancer
    const probes = yield* FiberMap.make<string>()
    const globalLimit = yield* Effect.makeSemaphore((yield* store.get).global.active_health.max_concurrent)
    const serverLimits = new Map<string, { readonly size: number; readonly semaphore: Effect.Semaphore }>()
    /** What each probe loop was started with, to restart it when its settings change. */
    const running = new Map<string, string>()

    const limitFor = (serverId: string, size: number) =>
      Effect.gen(function* () {
        const known = serverLimits.get(serverId)
        if (known !== undefined && known.size === size) return known.semaphore
        const semaphore = yield* Effect.makeSemaphore(size)
        serverLimits.set(serverId, { size, semaphore })
        return semaphore
      })

    const loop = (server: ServerDefinition, address: BackendAddress, settings: ActiveHealth, limit: Effect.Semaphore) =>
      Effect.gen(function* () {
        let healthy = true
        const name = `${server.id} ${formatHostPort(address)}`
        for (;;) {
          const result = yield* probe(server, address, settings).pipe(limit.withPermits(1), globalLimit.withPermits(1), Effect.either)
          const nowHealthy = result._tag === "Right"
          if (nowHealthy !== healthy) {
            yield* nowHealthy
              ? Effect.logInfo(`health: ${name} is up again`)
              : Effect.logWarning(`health: ${name} is down (${result._tag === "Left" ? result.left : ""})`)
          }
          healthy = nowHealthy
          yield* balancer.setHealth(server.id, address, healthy)
          yield* Effect.sleep(healthy ? settings.interval : settings.unhealthy_interval)
        }
      })

    /** Starts, restarts and stops probe loops so that they match the configuration. */
    const reconcile = Effect.gen(function* () {
      const snapshot = yield* store.get
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
          if (server !== undefined && address !== undefined) yield* balancer.setHealth(server.id, address, true)
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
    return { probing: Effect.sync(() => [...running.keys()]) }
  })
}) {}
