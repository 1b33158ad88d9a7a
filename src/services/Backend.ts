/**
 * Backend: connects to a server's addresses in the Balancer's order, each attempt bounded by the server's connect
 * timeout, up to `connect_max_attempts` addresses, reporting every result to the Balancer.
 */
import { Data, Duration, Effect, Scope } from "effect"
import * as net from "node:net"
import type { ServerDefinition } from "../schema/decode.js"
import type { GlobalConfig } from "../schema/GlobalConfig.js"
import { formatHostPort } from "../schema/HostPort.js"
import type { BackendAddress } from "../schema/ServerConfig.js"
import { Balancer } from "./Balancer.js"
import { applyKeepalive, type KeepaliveParams } from "./native/keepalive.js"

export interface AttemptFailure {
  readonly address: string
  readonly reason: string
}

export class BackendUnavailable extends Data.TaggedError("BackendUnavailable")<{
  readonly serverId: string
  readonly attempts: ReadonlyArray<AttemptFailure>
}> {
  override get message() {
    return this.attempts.length === 0
      ? `server ${this.serverId} has no address to try`
      : `no address of server ${this.serverId} answered: ${this.attempts.map((a) => `${a.address} (${a.reason})`).join(", ")}`
  }
}

export interface BackendConnection {
  readonly socket: net.Socket
  readonly address: BackendAddress
  /** Takes the socket out of the scope's care: a relay that outlives the scope owns it from now on. */
  readonly detach: () => void
}

/** Connects once within `timeoutMs` (a plain timer: this runs for every login); interrupting destroys the socket. */
const connectOnce = (address: BackendAddress, timeoutMs: number, holder: { socket: net.Socket | undefined }) =>
  Effect.async<net.Socket, Error>((resume) => {
    const socket = net.connect({ host: address.host, port: address.port, noDelay: true })
    holder.socket = socket
    const settle = () => {
      clearTimeout(timer)
      socket.off("error", onError)
      socket.off("connect", onConnect)
    }
    const onError = (error: Error) => {
      settle()
      resume(Effect.fail(error))
    }
    const onConnect = () => {
      settle()
      resume(Effect.succeed(socket))
    }
    const timer = setTimeout(() => {
      settle()
      socket.destroy()
      resume(Effect.fail(new Error(`no answer within ${Duration.format(Duration.millis(timeoutMs))}`)))
    }, timeoutMs)
    socket.once("error", onError)
    socket.once("connect", onConnect)
    return Effect.sync(() => {
      settle()
      socket.destroy()
    })
  })

const describeError = (error: unknown): string => {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code
    return code !== undefined ? code : error.message
  }
  return String(error)
}

/** `[keepalive]` in the form the socket layer takes. */
export const keepaliveParams = (global: GlobalConfig): KeepaliveParams => ({
  idleMs: Duration.toMillis(global.keepalive.time),
  intervalMs: Duration.toMillis(global.keepalive.interval),
  count: global.keepalive.retries
})

export const connectTimeoutOf = (server: ServerDefinition, global: GlobalConfig): Duration.Duration =>
  server.config.timeouts.connect ?? global.connect_timeout

export class Backend extends Effect.Service<Backend>()("portal/Backend", {
  effect: Effect.gen(function* () {
    const balancer = yield* Balancer

    /**
     * Connects to the first address that answers. The socket lives as long as the current scope; a permanent
     * error listener keeps a late socket error from ever becoming an uncaught exception.
     */
    const connect = (
      server: ServerDefinition,
      global: GlobalConfig
    ): Effect.Effect<BackendConnection, BackendUnavailable, Scope.Scope> =>
      Effect.gen(function* () {
        const order = yield* balancer.order(server)
        const limit = global.connect_max_attempts === 0 ? order.length : Math.min(order.length, global.connect_max_attempts)
        const timeoutMs = Duration.toMillis(connectTimeoutOf(server, global))
        const failures: Array<AttemptFailure> = []
        const holder: { socket: net.Socket | undefined } = { socket: undefined }
        // Registered before connecting, so the socket is closed whatever interrupts us later.
        yield* Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, Effect.sync(() => holder.socket?.destroy())))
        for (const address of order.slice(0, limit)) {
          const attempt = yield* Effect.either(connectOnce(address, timeoutMs, holder))
          if (attempt._tag === "Right") {
            const socket = attempt.right
            socket.on("error", () => {}) // errors surface through the relay
            applyKeepalive(socket, keepaliveParams(global))
            yield* balancer.reportSuccess(server.id, address)
            return { socket, address, detach: () => (holder.socket = undefined) }
          }
          holder.socket?.destroy()
          holder.socket = undefined
          failures.push({ address: formatHostPort(address), reason: describeError(attempt.left) })
          yield* balancer.reportFailure(server.id, address)
          yield* Effect.logDebug(`backend ${formatHostPort(address)} of ${server.id} failed: ${describeError(attempt.left)}`)
        }
        return yield* Effect.fail(new BackendUnavailable({ serverId: server.id, attempts: failures }))
      })

    return { connect }
  })
}) {}
