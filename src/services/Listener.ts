/**
 * Listener: accepts player connections on `bind`, caps them at `max_connections`, sets TCP_NODELAY and keepalive
 * (once on the listening socket, which accepted sockets inherit, where it can), and runs each connection's Session in
 * its own fiber. On shutdown it stops accepting, lets live sessions finish for a bounded time, then closes them.
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Stream from "effect/Stream"
import * as net from "node:net"
import { formatHostPort } from "../schema/HostPort.js"
import type { GlobalConfig } from "../schema/GlobalConfig.js"
import { keepaliveParams } from "./Backend.js"
import { ConfigStore } from "./ConfigStore.js"
import { applyKeepalive, applyToListener } from "./native/keepalive.js"
import { Relay } from "./Relay.js"
import { Session } from "./Session.js"
import { Stats } from "./Stats.js"

const ignoreError = () => {}

export class ListenError extends Data.TaggedError("ListenError")<{ readonly address: string; readonly reason: string }> {
  override get message() {
    return `cannot listen on ${this.address}: ${this.reason}`
  }
}

/** How long live sessions may go on after shutdown begins (PORTAL_SHUTDOWN_GRACE_MS overrides). */
export const shutdownGrace = (): Duration.Duration => {
  const fromEnv = Number(process.env.PORTAL_SHUTDOWN_GRACE_MS)
  return Number.isFinite(fromEnv) && fromEnv >= 0 ? Duration.millis(fromEnv) : Duration.seconds(10)
}

export class Listener extends Effect.Service<Listener>()("portal/Listener", {
  scoped: Effect.gen(function* () {
    const store = yield* ConfigStore
    const session = yield* Session
    const relay = yield* Relay
    const stats = (yield* Stats).dataPlane
    const snapshot = yield* store.get
    const { bind } = snapshot.global
    const fibers = yield* FiberSet.make<void, never>()
    const runFork = yield* FiberSet.runtime(fibers)<never>()
    let nextId = 0

    const server = net.createServer({ pauseOnConnect: true })
    let keepalive = keepaliveParams(snapshot.global)
    // Whether accepted sockets inherit TCP_NODELAY and keepalive from the listening socket; if not, each gets them.
    let inherited = false
    const applyLimits = (global: GlobalConfig) => {
      // Node closes a connection over the cap at once; 0 means no cap.
      server.maxConnections = global.max_connections > 0 ? global.max_connections : Number.MAX_SAFE_INTEGER
      keepalive = keepaliveParams(global)
      if (server.listening) inherited = applyToListener(server, keepalive)
    }
    applyLimits(snapshot.global)
    yield* store.changes.pipe(
      Stream.runForEach((next) => Effect.sync(() => applyLimits(next.global))),
      Effect.forkScoped
    )

    server.on("connection", (socket: net.Socket) => {
      // A socket must always have an error listener, or a reset between two reads would crash the process.
      socket.on("error", ignoreError)
      if (!inherited) {
        socket.setNoDelay(true)
        applyKeepalive(socket, keepalive)
      }
      runFork(session.handle({ id: ++nextId, socket }))
    })
    server.on("drop", (data?: { remoteAddress?: string }) => {
      stats.rejected("max_connections")
      runFork(Effect.logDebug(`max_connections reached: closed a connection from ${data?.remoteAddress ?? "?"}`))
    })

    const address = formatHostPort(bind)
    yield* Effect.async<void, ListenError>((resume) => {
      const onError = (error: NodeJS.ErrnoException) =>
        resume(Effect.fail(new ListenError({ address, reason: error.code === "EADDRINUSE" ? "the address is already in use" : error.message })))
      server.once("error", onError)
      server.listen({ host: bind.host, port: bind.port }, () => {
        server.off("error", onError)
        inherited = applyToListener(server, keepalive)
        resume(Effect.void)
      })
    })
    server.on("error", (error) => runFork(Effect.logError(`listener error: ${error.message}`)))
    const bound = server.address() as net.AddressInfo
    yield* Effect.logInfo(`listening on ${formatHostPort({ host: bound.address, port: bound.port })}`)

    // Runs before the fibers are interrupted (finalizers run in reverse order): stop accepting, then drain
    // connections still in their handshake and relayed sessions; the Relay service ends what is left.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        server.close()
        const live = (yield* FiberSet.size(fibers)) + (yield* relay.active)
        if (live > 0) {
          const grace = shutdownGrace()
          yield* Effect.logInfo(`shutting down: waiting up to ${Duration.format(grace)} for ${live} connection(s)`)
          // Finalizers run uninterruptibly; the wait must be interruptible or the timeout could never end it.
          yield* Effect.zipRight(FiberSet.awaitEmpty(fibers), relay.awaitIdle).pipe(Effect.interruptible, Effect.timeoutOption(grace))
        }
      })
    )

    return {
      /** The address actually bound (port 0 in `bind` gets a free port). */
      address: { host: bound.address, port: bound.port },
      connections: FiberSet.size(fibers)
    }
  })
}) {}
