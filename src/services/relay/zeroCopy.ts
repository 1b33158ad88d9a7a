/**
 * zero_copy relay: once a connection is past the login phase, its bytes move between client and backend inside the
 * kernel with splice(2) (the addon built from native/splice.cc), so they never cross into JavaScript. Linux only, and
 * only when the addon was built at install; `spliceSupport()` tells whether it can be used.
 */
import type { Socket } from "node:net"
import { loadNativeAddon, type NativeAddon, type SpliceResult, type SpliceStats } from "../native/addon.js"

export type { SpliceResult, SpliceStats } from "../native/addon.js"
import { tcpFdOf, tcpHandleOf } from "../native/tcpHandle.js"

/** Where each counter sits in what `SpliceSession.counters()` returns. */
export const SpliceCounter = {
  clientToBackend: 0,
  backendToClient: 1,
  lastClientReadMs: 2,
  lastBackendReadMs: 3,
  pendingToClient: 4,
  pendingToBackend: 5,
  /** 1 once a side has ended (or the session was cancelled): the addon's flush deadline bounds what is left. */
  closing: 6
} as const

export interface SpliceSession {
  /** Settles when the session has ended (after `onDone` of startSplice). */
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

let support: SpliceSupport | undefined

/** Whether the addon loaded; the reason when not (not Linux, build failed, load error). Computed once. */
export const spliceSupport = (): SpliceSupport =>
  (support ??= (() => {
    const result = loadNativeAddon()
    if (!("addon" in result)) return { available: false, reason: result.reason }
    if (typeof result.addon.release !== "function")
      return { available: false, reason: "the addon has no release() (built by an older version; run npm run install)" }
    return { available: true }
  })())

const socketFd = (socket: Socket, side: string): number => {
  const fd = tcpFdOf(socket)
  if (socket.destroyed || socket.connecting || fd === undefined)
    throw new Error(`startSplice: the ${side} socket is not a connected TCP socket`)
  // Decoded text cannot be turned back into the exact bytes that were buffered.
  if (socket.readableEncoding !== null) throw new Error(`startSplice: the ${side} socket has an encoding set`)
  return fd
}

const noRead = () => {}

/** One counter of what `SpliceSession.counters()` returned. */
export const counterAt = (counters: Float64Array, name: keyof typeof SpliceCounter): number => counters[SpliceCounter[name]] ?? 0

const sharedCounters = new Float64Array(7)
const fillCounters = (stats: SpliceStats, closing: boolean): Float64Array => {
  sharedCounters[SpliceCounter.clientToBackend] = stats.clientToBackend
  sharedCounters[SpliceCounter.backendToClient] = stats.backendToClient
  sharedCounters[SpliceCounter.lastClientReadMs] = stats.lastClientReadMs
  sharedCounters[SpliceCounter.lastBackendReadMs] = stats.lastBackendReadMs
  sharedCounters[SpliceCounter.pendingToClient] = stats.pendingToClient
  sharedCounters[SpliceCounter.pendingToBackend] = stats.pendingToBackend
  sharedCounters[SpliceCounter.closing] = closing ? 1 : 0
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
  tcpHandleOf(socket)?.readStop()
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

/** Calls `then` once everything written to `socket` so far has reached the kernel, or it can take nothing more. */
const whenFlushed = (socket: Socket, then: () => void): void => {
  const settle = () => {
    socket.off("close", settle)
    socket.off("finish", settle)
    then()
  }
  socket.once("close", settle)
  if (socket.writableEnded) socket.once("finish", settle)
  // Write callbacks run in order: this one once every earlier write is done (or failed).
  else socket.write(Buffer.alloc(0), settle)
}

const errorText = (error: Error): string => (error as NodeJS.ErrnoException).code ?? error.message

/** Where a spliced socket keeps its session, for the listeners shared by every socket. */
const SESSION = Symbol("portal.spliceSession")
/** The socket's own `_destroy`, which destroySpliced calls after the relay has let go. */
const ORIGINAL_DESTROY = Symbol("portal.originalDestroy")
type SplicedSocket = Socket & { [SESSION]?: SpliceRelaySession | undefined; [ORIGINAL_DESTROY]?: Socket["_destroy"] }

/** Sessions whose sockets are flushed, started together from one microtask after the code that handed them over. */
let beginning: Array<SpliceRelaySession> = []
const beginAll = (): void => {
  const due = beginning
  beginning = []
  for (const session of due) session.begin()
}
const beginSoon = (session: SpliceRelaySession): void => {
  if (beginning.push(session) === 1) queueMicrotask(beginAll)
}

/** The first error of a spliced socket, kept for the report. Without a listener an error would end the process. */
function onSplicedError(this: SplicedSocket, error: Error): void {
  this[SESSION]?.noteError(this, error)
}

/** A spliced socket closed from Portal's side (destroyed): the session ends. */
function onSplicedClose(this: SplicedSocket): void {
  this[SESSION]?.closed(this)
}

/**
 * `_destroy` of a spliced socket: the relay borrows the socket's fd, so it must let go before Node closes it, or a
 * connection that gets the same fd number next could receive this one's bytes.
 */
function destroySpliced(this: SplicedSocket, error: Error | null, callback: (error?: Error | null) => void): void {
  this[SESSION]?.release()
  const original = this[ORIGINAL_DESTROY]
  if (original === undefined) return callback(error)
  original.call(this, error, callback)
}

/**
 * One zero_copy session. A class with listeners shared by every socket rather than closures: every relayed player
 * has one for as long as it stays.
 */
class SpliceRelaySession implements SpliceSession {
  private handle: object | undefined = undefined
  private final: SpliceResult | undefined = undefined
  private clientError: string | undefined = undefined
  private backendError: string | undefined = undefined
  private donePromise: Promise<SpliceResult> | undefined = undefined
  private resolveDone: ((result: SpliceResult) => void) | undefined = undefined
  private flushing = 0
  private readonly early: SpliceStats

  constructor(
    private readonly native: NativeAddon,
    private readonly client: SplicedSocket,
    private readonly backend: SplicedSocket,
    private readonly clientFd: number,
    private readonly backendFd: number,
    private readonly onDone: ((result: SpliceResult) => void) | undefined
  ) {
    const handoffMs = Date.now()
    this.early = {
      clientToBackend: forward(takeOver(client), backend),
      backendToClient: forward(takeOver(backend), client),
      lastClientReadMs: handoffMs,
      lastBackendReadMs: handoffMs,
      pendingToClient: 0,
      pendingToBackend: 0
    }
    for (const socket of [client, backend]) {
      socket[SESSION] = this
      socket[ORIGINAL_DESTROY] = socket._destroy
      socket._destroy = destroySpliced
      socket.on("error", onSplicedError).on("close", onSplicedClose)
    }
    const unflushed = [client, backend].filter((socket) => !isFlushed(socket))
    if (unflushed.length === 0) {
      beginSoon(this)
      return
    }
    this.flushing = unflushed.length
    const flushedOne = () => {
      if (--this.flushing === 0) this.begin()
    }
    for (const socket of unflushed) whenFlushed(socket, flushedOne)
  }

  get done(): Promise<SpliceResult> {
    if (this.donePromise === undefined) {
      const final = this.final
      this.donePromise =
        final !== undefined ? Promise.resolve(final) : new Promise<SpliceResult>((resolve) => (this.resolveDone = resolve))
    }
    return this.donePromise
  }

  /** Native counters start at zero: the bytes moved during the handoff count too. */
  private withEarly<A extends SpliceStats>(stats: A): A {
    return {
      ...stats,
      clientToBackend: stats.clientToBackend + this.early.clientToBackend,
      backendToClient: stats.backendToClient + this.early.backendToClient
    }
  }

  stats(): SpliceStats {
    return this.final ?? (this.handle === undefined ? this.early : this.withEarly(this.native.stats(this.handle)))
  }

  counters(): Float64Array {
    if (this.final !== undefined || this.handle === undefined) return fillCounters(this.final ?? this.early, this.final !== undefined)
    // An addon built before `closing` existed leaves its slot alone: not closing, whatever a finished session left.
    sharedCounters[SpliceCounter.closing] = 0
    this.native.statsInto(this.handle, sharedCounters)
    sharedCounters[SpliceCounter.clientToBackend] = counterAt(sharedCounters, "clientToBackend") + this.early.clientToBackend
    sharedCounters[SpliceCounter.backendToClient] = counterAt(sharedCounters, "backendToClient") + this.early.backendToClient
    return sharedCounters
  }

  cancel(): void {
    if (this.final !== undefined) return
    if (this.handle === undefined) return this.finishEarly("cancelled", undefined)
    this.native.cancel(this.handle)
  }

  /** Called before a socket of the session is destroyed: the relay stops using both fds at once. */
  release(): void {
    if (this.final === undefined && this.handle !== undefined) this.native.release(this.handle)
  }

  noteError(socket: Socket, error: Error): void {
    if (socket === this.client) this.clientError ??= errorText(error)
    else this.backendError ??= errorText(error)
  }

  closed(socket: Socket): void {
    if (this.final !== undefined) return
    if (this.handle !== undefined) this.native.cancel(this.handle)
    else this.finishEarly(socket === this.client ? "client_closed" : "backend_closed", this.errorOf(socket))
  }

  /** Hands both sockets to the splice relay, once everything written to them before has left. */
  begin(): void {
    if (this.final !== undefined) return
    const { client, backend } = this
    const closed = client.destroyed ? client : backend.destroyed ? backend : undefined
    if (closed !== undefined)
      return this.finishEarly(closed === client ? "client_closed" : "backend_closed", this.errorOf(closed))
    try {
      this.handle = this.native.start(this.clientFd, this.backendFd, (result) => this.finish(this.withEarly(result)))
    } catch (error) {
      this.finishEarly("error", error instanceof Error ? error.message : String(error))
    }
  }

  private errorOf(socket: Socket): string | undefined {
    return socket === this.client ? this.clientError : this.backendError
  }

  private finishEarly(reason: SpliceResult["reason"], error: string | undefined): void {
    this.finish({ ...this.early, reason, ...(error === undefined ? {} : { error }) })
  }

  private finish(result: SpliceResult): void {
    if (this.final !== undefined) return
    this.final = result
    this.client.destroy()
    this.backend.destroy()
    // A closed socket can outlive its connection in the heap for a while; the session, and through `onDone` the
    // relay and the login that started it, must not live on with it (they would be promoted, at connection rate).
    this.client[SESSION] = undefined
    this.backend[SESSION] = undefined
    this.resolveDone?.(result)
    this.onDone?.(result)
  }
}

/**
 * Takes over two connected sockets after the caller has written whatever it needed to (handshake replay etc.).
 * Stops Node reading both sockets, moves any bytes Node already buffered from one socket to the other, waits for
 * pending writes to flush, then splices in the kernel until either side closes (EOF or error) or cancel().
 * When one side ends cleanly, the bytes it sent flush to the other side, which then gets FIN; the other side is read
 * and discarded until it closes too (at most 2 s), so that closing its socket sends no RST that could make its peer
 * drop the last bytes unread. After an error both stop at once, past a bounded flush toward the healthy side.
 * When the session ends (`onDone`, then `done`), both sockets have been destroyed exactly once; the addon only
 * borrowed their fds and never closes them. Empty pipes go back to the relay's pool (at most 64, shared by every
 * session).
 * Throws if spliceSupport() is not available.
 *
 * From the call on the relay owns both sockets: their 'data' and 'readable' listeners are removed and their timeouts
 * cleared. Destroying one of them meanwhile ends the session at once (the relay lets go of both fds first, and what
 * its pipes held is dropped); cancel() is the way to stop it with a flush. The sockets are
 * handed to the splice relay from a microtask, after the caller's synchronous code.
 */
export const startSplice = (client: Socket, backend: Socket, onDone?: (result: SpliceResult) => void): SpliceSession => {
  const support = spliceSupport()
  const result = loadNativeAddon()
  if (!support.available || !("addon" in result))
    throw new Error(`startSplice: zero_copy is unavailable: ${support.available ? "the addon did not load" : support.reason}`)
  const clientFd = socketFd(client, "client")
  const backendFd = socketFd(backend, "backend")
  if (client === backend) throw new Error("startSplice: client and backend are the same socket")
  return new SpliceRelaySession(result.addon, client, backend, clientFd, backendFd, onDone)
}
