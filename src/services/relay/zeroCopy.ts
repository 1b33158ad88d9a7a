/**
 * zero_copy relay: once a connection is past the login phase, its bytes move between client and backend inside the
 * kernel with splice(2) (the addon built from native/splice.cc), so they never cross into JavaScript. Linux only, and
 * only when the addon was built at install; `spliceSupport()` tells whether it can be used.
 */
import type { Socket } from "node:net"
import { loadNativeAddon, type NativeAddon } from "../native/addon.js"

export interface SpliceStats {
  /** Bytes relayed so far client -> backend. */
  readonly clientToBackend: number
  /** Bytes relayed so far backend -> client. */
  readonly backendToClient: number
  /** Date.now()-style ms timestamp of the last byte read from the client (the handoff time before any). */
  readonly lastClientReadMs: number
  /** Same for the backend. */
  readonly lastBackendReadMs: number
  /** Bytes read from the backend not yet written to the client (a growing value means the client stalls). */
  readonly pendingToClient: number
  /** Bytes read from the client not yet written to the backend. */
  readonly pendingToBackend: number
}

export interface SpliceResult extends SpliceStats {
  readonly reason: "client_closed" | "backend_closed" | "cancelled" | "error"
  /** Error code or message when the end was an error rather than an end of stream. */
  readonly error?: string
}

/** Where each counter sits in what `SpliceSession.counters()` returns. */
export const SpliceCounter = {
  clientToBackend: 0,
  backendToClient: 1,
  lastClientReadMs: 2,
  lastBackendReadMs: 3,
  pendingToClient: 4,
  pendingToBackend: 5
} as const

export interface SpliceSession {
  readonly done: Promise<SpliceResult>
  stats(): SpliceStats
  /**
   * The same counters in an array indexed by `SpliceCounter`, without allocating: the array is shared by every
   * session and valid until the next call.
   */
  counters(): Float64Array
  /** Stops relaying; `done` resolves with reason "cancelled". Idempotent. */
  cancel(): void
}

export type SpliceSupport = { readonly available: true } | { readonly available: false; readonly reason: string }

/** The parts of Node's internal TCP handle (TCPWrap) used here. */
interface TcpHandle {
  readonly fd: number
  readStop(): number
}

let support: SpliceSupport | undefined

/** Whether the addon loaded; the reason when not (not Linux, build failed, load error). Computed once. */
export const spliceSupport = (): SpliceSupport =>
  (support ??= (() => {
    const result = loadNativeAddon()
    return "addon" in result ? { available: true } : { available: false, reason: result.reason }
  })())

const tcpHandle = (socket: Socket): TcpHandle | undefined => {
  const handle = (socket as unknown as { _handle?: (TcpHandle & object) | null })._handle
  return handle?.constructor.name === "TCP" ? handle : undefined
}

const socketFd = (socket: Socket, side: string): number => {
  const fd = tcpHandle(socket)?.fd
  if (socket.destroyed || socket.connecting || fd === undefined || fd < 0)
    throw new Error(`startSplice: the ${side} socket is not a connected TCP socket`)
  // Decoded text cannot be turned back into the exact bytes that were buffered.
  if (socket.readableEncoding !== null) throw new Error(`startSplice: the ${side} socket has an encoding set`)
  return fd
}

const noRead = () => {}

/** One counter of what `SpliceSession.counters()` returned. */
export const counterAt = (counters: Float64Array, name: keyof typeof SpliceCounter): number => counters[SpliceCounter[name]] ?? 0

let wakeScheduled = false
/**
 * The relay thread adopts new sessions when woken: once per turn of the event loop, after every session this turn
 * started, rather than once per session (on a busy core each wake-up can cost a thread switch).
 */
const wakeRelaySoon = (native: NativeAddon): void => {
  if (wakeScheduled) return
  wakeScheduled = true
  setImmediate(() => {
    wakeScheduled = false
    native.wake()
  })
}

const sharedCounters = new Float64Array(6)
const fillCounters = (stats: SpliceStats): Float64Array => {
  sharedCounters[SpliceCounter.clientToBackend] = stats.clientToBackend
  sharedCounters[SpliceCounter.backendToClient] = stats.backendToClient
  sharedCounters[SpliceCounter.lastClientReadMs] = stats.lastClientReadMs
  sharedCounters[SpliceCounter.lastBackendReadMs] = stats.lastBackendReadMs
  sharedCounters[SpliceCounter.pendingToClient] = stats.pendingToClient
  sharedCounters[SpliceCounter.pendingToBackend] = stats.pendingToBackend
  return sharedCounters
}

/** Stops Node reading the socket for good and returns the bytes it had already buffered. */
const takeOver = (socket: Socket): Buffer => {
  socket.setTimeout(0)
  socket.removeAllListeners("data")
  socket.removeAllListeners("readable")
  socket.pause()
  // pause() leaves libuv reading into Node's buffer; readStop() stops it, and a no-op _read keeps Node from
  // restarting it while the buffer is drained below.
  socket._read = noRead
  tcpHandle(socket)?.readStop()
  const chunks: Array<Buffer> = []
  for (let chunk: Buffer | null; (chunk = socket.read() as Buffer | null) !== null; ) chunks.push(chunk)
  return Buffer.concat(chunks)
}

/** Writes bytes taken from the other socket; returns how many were handed over (none once `socket` is ended). */
const forward = (bytes: Buffer, socket: Socket): number => {
  if (bytes.length === 0 || socket.writableEnded || socket.destroyed) return 0
  socket.write(bytes)
  return bytes.length
}

/** Whether everything written to `socket` so far has reached the kernel, or it can take nothing more. */
const isFlushed = (socket: Socket): boolean =>
  socket.destroyed || socket.writableFinished || (socket.writableLength === 0 && !socket.writableEnded)

/** Resolves once everything written to `socket` so far has reached the kernel, or it can take nothing more. */
const flushed = (socket: Socket): Promise<void> =>
  new Promise((resolve) => {
    if (isFlushed(socket)) return resolve()
    const settle = () => {
      socket.off("close", settle)
      socket.off("finish", settle)
      resolve()
    }
    socket.once("close", settle)
    if (socket.writableEnded) socket.once("finish", settle)
    // Write callbacks run in order: this one once every earlier write is done (or failed).
    else socket.write(Buffer.alloc(0), settle)
  })

const errorText = (error: Error): string => (error as NodeJS.ErrnoException).code ?? error.message

/**
 * Takes over two connected sockets after the caller has written whatever it needed to (handshake replay etc.).
 * Stops Node reading both sockets, moves any bytes Node already buffered from one socket to the other, waits for
 * pending writes to flush, then splices in the kernel until either side closes (EOF or error) or cancel().
 * When one side ends cleanly, the bytes it sent flush to the other side, which then gets FIN; the other side is read
 * and discarded until it closes too (at most 2 s), so that closing its socket sends no RST that could make its peer
 * drop the last bytes unread. After an error both stop at once, past a bounded flush toward the healthy side.
 * When done resolves, both sockets have been destroyed exactly once and the addon has closed its duplicates of them;
 * empty pipes go back to the relay's pool (at most 64, shared by every session).
 * Throws if spliceSupport() is not available.
 *
 * From the call on the relay owns both sockets: their 'data' and 'readable' listeners are removed and their timeouts
 * cleared. Destroying one of them meanwhile cancels the session; cancel() is the way to stop it.
 */
export const startSplice = (client: Socket, backend: Socket): SpliceSession => {
  const result = loadNativeAddon()
  if (!("addon" in result)) throw new Error(`startSplice: zero_copy is unavailable: ${result.reason}`)
  const native = result.addon
  const clientFd = socketFd(client, "client")
  const backendFd = socketFd(backend, "backend")
  if (client === backend) throw new Error("startSplice: client and backend are the same socket")

  const handoffMs = Date.now()
  const early: SpliceStats = {
    clientToBackend: forward(takeOver(client), backend),
    backendToClient: forward(takeOver(backend), client),
    lastClientReadMs: handoffMs,
    lastBackendReadMs: handoffMs,
    pendingToClient: 0,
    pendingToBackend: 0
  }
  // Native counters start at zero: the bytes moved during the handoff count too.
  const withEarly = <A extends SpliceStats>(stats: A): A => ({
    ...stats,
    clientToBackend: stats.clientToBackend + early.clientToBackend,
    backendToClient: stats.backendToClient + early.backendToClient
  })

  let handle: object | undefined
  let final: SpliceResult | undefined
  let resolveDone: (result: SpliceResult) => void = () => {}
  const done = new Promise<SpliceResult>((resolve) => (resolveDone = resolve))
  // The first error of each socket, for the report (plain fields: every live session has these).
  let clientError: string | undefined
  let backendError: string | undefined
  const errorOf = (socket: Socket) => (socket === client ? clientError : backendError)

  const finish = (result: SpliceResult) => {
    if (final !== undefined) return
    final = result
    client.destroy()
    backend.destroy()
    resolveDone(result)
  }
  const finishEarly = (reason: SpliceResult["reason"], error: string | undefined) =>
    finish({ ...early, reason, ...(error === undefined ? {} : { error }) })

  const cancel = () => {
    if (final !== undefined) return
    if (handle === undefined) return finishEarly("cancelled", undefined)
    native.cancel(handle)
  }

  for (const socket of [client, backend]) {
    // Without a listener an error would crash the process; the session reports it instead.
    socket.on("error", (error) => {
      if (socket === client) clientError ??= errorText(error)
      else backendError ??= errorText(error)
    })
    socket.on("close", () => {
      if (final !== undefined) return
      if (handle !== undefined) native.cancel(handle)
      else finishEarly(socket === client ? "client_closed" : "backend_closed", errorOf(socket))
    })
  }

  const begin = () => {
    if (final !== undefined) return
    const closed = [client, backend].find((socket) => socket.destroyed)
    if (closed !== undefined)
      return finishEarly(closed === client ? "client_closed" : "backend_closed", errorOf(closed))
    try {
      handle = native.start(clientFd, backendFd, (result) => finish(withEarly(result)))
      wakeRelaySoon(native)
    } catch (error) {
      finishEarly("error", error instanceof Error ? error.message : String(error))
    }
  }
  void Promise.all([flushed(client), flushed(backend)]).then(begin)

  return {
    done,
    stats: () => final ?? (handle === undefined ? early : withEarly(native.stats(handle))),
    counters: () => {
      if (final !== undefined || handle === undefined) return fillCounters(final ?? early)
      native.statsInto(handle, sharedCounters)
      sharedCounters[SpliceCounter.clientToBackend] = counterAt(sharedCounters, "clientToBackend") + early.clientToBackend
      sharedCounters[SpliceCounter.backendToClient] = counterAt(sharedCounters, "backendToClient") + early.backendToClient
      return sharedCounters
    },
    cancel
  }
}
