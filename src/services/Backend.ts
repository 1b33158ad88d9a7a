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
}

/** Connects once; interrupting (a timeout) destroys the half-open socket. */
const connectOnce = (address: BackendAddress, holder: { socket: net.Socket | undefined }) =>
  Effect.async<net.Socket, Error>((resume) => {
    const socket = net.connect({ host: address.host, port: address.port, noDelay: true })
    holder.socket = socket
    const onError = (error: Error) => {
      socket.off("connect", onConnect)
      resume(Effect.fail(error))
    }
    const onConnect = () => {
      socket.off("error", onError)
      resume(Effect.succeed(socket))
    }
    socket.once("error", onError)
    socket.once("connect", onConnect)
    return Effect.sync(() => socket.destroy())
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
        const timeout = connectTimeoutOf(server, global)
        const failures: Array<AttemptFailure> = []
        for (const address of order.slice(0, limit)) {
          const holder: { socket: net.Socket | undefined } = { socket: undefined }
          // Registered before connecting, so the socket is closed whatever interrupts us later.
          yield* Effect.addFinalizer(() => Effect.sync(() => holder.socket?.destroy()))
          const attempt = yield* connectOnce(address, holder).pipe(
            Effect.timeoutFail({
              duration: timeout,
              onTimeout: () => new Error(`no answer within ${Duration.format(timeout)}`)
            }),
            Effect.either
          )
          if (attempt._tag === "Right") {
            const socket = attempt.right
            socket.on("error", () => {}) // errors surface through the relay
            applyKeepalive(socket, keepaliveParams(global))
            yield* balancer.reportSuccess(server.id, address)
            return { socket, address }
          }
          holder.socket?.destroy()
          failures.push({ address: formatHostPort(address), reason: describeError(attempt.left) })
          yield* balancer.reportFailure(server.id, address)
          yield* Effect.logDebug(`backend ${formatHostPort(address)} of ${server.id} failed: ${describeError(attempt.left)}`)
        }
        return yield* Effect.fail(new BackendUnavailable({ serverId: server.id, attempts: failures }))
      })

    return { connect }
  })
}) {}
