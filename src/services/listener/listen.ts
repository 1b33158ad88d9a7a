/**
 * Listening: accepts player connections on `bind`, caps them at `max_connections`, sets TCP_NODELAY and keepalive
 * (once on the listening socket, which accepted sockets inherit, where it can), and runs each connection's Session in
 * its own fiber. On shutdown it stops accepting, lets live sessions finish for a bounded time, then closes them.
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as net from "node:net"
import { formatHostPort } from "../../schema/HostPort.js"
import type { GlobalConfig } from "../../schema/GlobalConfig.js"
import type { ConfigStore } from "../ConfigStore.js"
import { applyKeepalive, applyToListener, keepaliveParams } from "../native/keepalive.js"
import type { Relay } from "../Relay.js"
import type { ConnectionHandler } from "../session/connection.js"
import { LiveList } from "../collections/LiveList.js"
import { acceptSteady } from "../net/steadySockets.js"
import { emptyWaiters } from "../runtime/emptyWaiters.js"

const ignoreError = () => {}

export class ListenError extends Data.TaggedError("ListenError")<{ readonly address: string; readonly reason: string }> {
  override get message() {
    return `cannot listen on ${this.address}: ${this.reason}`
  }
}

/** How long live sessions may go on after shutdown begins (PORTAL_SHUTDOWN_GRACE_MS overrides). */
export const shutdownGrace = (): Duration.Duration => {
  const text = process.env.PORTAL_SHUTDOWN_GRACE_MS?.trim() ?? ""
  // Blank is unset (`PORTAL_SHUTDOWN_GRACE_MS=` in a unit file), not 0: Number("") would end every session at once.
  const fromEnv = text.length === 0 ? Number.NaN : Number(text)
  return Number.isFinite(fromEnv) && fromEnv >= 0 ? Duration.millis(fromEnv) : Duration.seconds(10)
}

/** Where a listener gets its socket: `bind` itself, or a listening socket made for it (a worker's copy, SO_REUSEPORT). */
export type ListenTarget =
  | { readonly _tag: "Bind" }
  | { readonly _tag: "Fd"; readonly fd: number }
  /** `host:port` with Node's own SO_REUSEPORT (Node 22.12+). */
  | { readonly _tag: "ReusePort"; readonly host: string; readonly port: number }

export interface ListenerOptions {
  /** Takes each connection (session/pipeline.ts). */
  readonly handle: ConnectionHandler
  readonly store: ConfigStore["Type"]
  readonly relay: Pick<Relay, "active" | "awaitIdle" | "endAll">
  readonly target?: ListenTarget
  /**
   * Takes a place under `max_connections` for a new connection, or says there is none (proxy-wide across worker
   * threads); without it, this listener's own cap applies (Node closes connections over it before they reach JS).
   */
  readonly admit?: (max: number) => (() => void) | undefined
  /** The next connection id (unique proxy-wide with workers); a counter of this listener's own without it. */
  readonly nextId?: () => number
  /** Counts a connection refused for `max_connections`. */
  readonly onRefused?: () => void
  /** The grace live connections get at shutdown, read when it begins (a worker's comes from the main thread). */
  readonly grace?: () => Duration.Duration
}

/**
 * The fibers of the connections past their opening: forked from the listener's runtime, each in a LiveList while it
 * runs (a Set of fibers would keep finished connections alive: collections/LiveList.ts), interrupted when the scope
 * closes, after the listener's own finalizer has drained them.
 */
const connectionFibers = Effect.gen(function* () {
  const runFork = Runtime.runFork(yield* Effect.runtime<never>())
  const running = new LiveList<Fiber.RuntimeFiber<void, never>>()
  const empty = emptyWaiters(() => running.size === 0)
  let closed = false
  yield* Effect.addFinalizer(() => Fiber.interruptAll(running.values()))
  const fork = (effect: Effect.Effect<void>): void => {
    if (closed) return
    const fiber = runFork(effect)
    const link = running.add(fiber)
    fiber.addObserver(() => {
      running.remove(link)
      empty.wakeIfEmpty()
    })
  }
  yield* Effect.addFinalizer(() => Effect.sync(() => void (closed = true)))
  return { fork, size: () => running.size, awaitEmpty: empty.wait }
})

/**
 * Accepts connections and hands each to the session (its opening on callbacks, then a fiber) until the scope closes;
 * then stops accepting and gives live connections a bounded time to finish.
 */
export const listen = (options: ListenerOptions) =>
  Effect.gen(function* () {
    const { store, relay, admit, handle } = options
    const snapshot = yield* store.get
    const { bind } = snapshot.global
    const fibers = yield* connectionFibers
    const fork = fibers.fork
    let counter = 0
    const nextId = options.nextId ?? (() => ++counter)

    const server = net.createServer({ pauseOnConnect: true })
    let keepalive = keepaliveParams(snapshot.global)
    let maxConnections = snapshot.global.max_connections
    // Whether accepted sockets inherit TCP_NODELAY and keepalive from the listening socket; if not, each gets them.
    let inherited = false
    const applyLimits = (global: GlobalConfig) => {
      maxConnections = global.max_connections
      // Node closes a connection over its own cap at once; 0 means no cap. A shared cap is checked per connection.
      server.maxConnections = admit === undefined && maxConnections > 0 ? maxConnections : Number.MAX_SAFE_INTEGER
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
      if (admit !== undefined) {
        const place = admit(maxConnections)
        if (place === undefined) {
          options.onRefused?.()
          // Read first: a destroyed socket no longer knows its peer.
          const from = socket.remoteAddress ?? "?"
          socket.destroy()
          fork(Effect.logDebug(`max_connections reached: closed a connection from ${from}`))
          return
        }
        // A socket closes once: `on` spares once's wrapper.
        socket.on("close", place)
      }
      if (!inherited) {
        socket.setNoDelay(true)
        applyKeepalive(socket, keepalive)
      }
      // Every connection has the same shape, traced or not.
      handle.accept({ id: nextId(), socket, trace: undefined }, fork)
    })
    server.on("drop", (data?: { remoteAddress?: string }) => {
      options.onRefused?.()
      fork(Effect.logDebug(`max_connections reached: closed a connection from ${data?.remoteAddress ?? "?"}`))
    })

    const target = options.target ?? { _tag: "Bind" }
    const address = target._tag === "Fd" ? `${formatHostPort(bind)} (descriptor ${target.fd})` : formatHostPort(bind)
    yield* Effect.async<void, ListenError>((resume) => {
      const onError = (error: NodeJS.ErrnoException) =>
        resume(Effect.fail(new ListenError({ address, reason: error.code === "EADDRINUSE" ? "the address is already in use" : error.message })))
      server.once("error", onError)
      const ready = () => {
        server.off("error", onError)
        acceptSteady(server)
        inherited = applyToListener(server, keepalive)
        resume(Effect.void)
      }
      if (target._tag === "Bind") server.listen({ host: bind.host, port: bind.port }, ready)
      else if (target._tag === "Fd") server.listen({ fd: target.fd }, ready)
      else {
        const options: net.ListenOptions & { readonly reusePort: boolean } = { host: target.host, port: target.port, reusePort: true }
        server.listen(options, ready)
      }
    })
    server.on("error", (error) => fork(Effect.logError(`listener error: ${error.message}`)))
    const bound = server.address() as net.AddressInfo

    // Runs before the fibers are interrupted (finalizers run in reverse order): stop accepting, then drain
    // connections still in their handshake and relayed sessions, then end the sessions the grace left, here: the
    // services they report to as they end (the registry, telemetry's trace export) stop after the listener.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        server.close()
        const live = handle.opening() + fibers.size() + (yield* relay.active)
        if (live > 0) {
          const grace = (options.grace ?? shutdownGrace)()
          yield* Effect.logInfo(`shutting down: waiting up to ${Duration.format(grace)} for ${live} connection(s)`)
          // Openings have no fiber to wait for: they are looked at until none is left (each ends within its timeouts).
          const openingsDone = Effect.repeat(Effect.sync(handle.opening), { until: (left) => left === 0, schedule: Schedule.spaced("20 millis") })
          // Finalizers run uninterruptibly; the wait must be interruptible or the timeout could never end it.
          yield* Effect.zipRight(openingsDone, Effect.zipRight(fibers.awaitEmpty, relay.awaitIdle)).pipe(Effect.interruptible, Effect.timeoutOption(grace))
          yield* relay.endAll
          // Their connections' last steps (the player's leave, the trace) before the fibers are interrupted.
          yield* fibers.awaitEmpty.pipe(Effect.interruptible, Effect.timeoutOption(Duration.seconds(1)))
        }
        handle.closeOpenings()
        // Their sockets say they closed on a later turn of the loop: counted before the services after the listener
        // (telemetry's last export) read the open connections.
        yield* Effect.repeat(Effect.sync(handle.unclosed), { until: (left) => left <= 0, schedule: Schedule.spaced("5 millis") }).pipe(
          Effect.interruptible,
          Effect.timeoutOption(Duration.seconds(1))
        )
      })
    )

    return {
      /** The address actually bound (port 0 in `bind` gets a free port). */
      address: { host: bound.address, port: bound.port },
      connections: Effect.sync(() => fibers.size() + handle.opening())
    }
  })


/** Where the proxy listens for players (port 0 in `bind` resolved), whichever thread accepts. */
export class ListeningAddress extends Context.Tag("portal/ListeningAddress")<
  ListeningAddress,
  { readonly host: string; readonly port: number }
>() {}
