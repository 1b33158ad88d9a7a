/**
 * Reading a relayed socket into memory Portal provides (Node's `onread` mechanism, switched on after the handshake
 * phase) instead of Node's default read path, which mallocs a fresh 64 KiB ArrayBuffer for every read and leaves it
 * to the garbage collector: with thousands of players sending small packets that was most of a relay's cost, and the
 * collector's pauses were the latency players notice.
 *
 * A reader reads into the one buffer shared by every reader on the thread unless it asks for a buffer of its own
 * (`readBuffer`). What it is given is valid only until its callback returns, since the next read of any socket
 * overwrites the shared buffer: whatever must outlive the callback (bytes a socket did not take, a partial packet) is
 * copied out (`isSharedReadBuffer` tells such bytes). Where Node does not offer this (the internals are missing), the
 * caller reads with `data` events.
 */
import type { Socket } from "node:net"

/** Shared by every reader; only ever read into and copied out of, so never pinned by a pending write. */
const SHARED_BYTES = 64 * 1024

let shared: Buffer | undefined
export const sharedReadBuffer = (): Buffer => (shared ??= Buffer.allocUnsafe(SHARED_BYTES))

/** Whether `bytes` are in the shared read buffer: valid only until the read that delivered them returns. */
export const isSharedReadBuffer = (bytes: Uint8Array): boolean => shared !== undefined && bytes.buffer === shared.buffer

/** What reads a socket in user-buffer mode (methods: called on the reader). */
export interface UserBufferReader {
  /** `length` bytes arrived at the start of `buffer` (the one `readBuffer` gave). */
  onRead(length: number, buffer: Buffer): void
  /** The buffer the next read of this socket goes into. */
  readBuffer(): Buffer
}

/** The slots of Node's `onread` support on a socket, found by their names on the first socket asked about. */
interface OnReadSlots {
  readonly buffer: symbol
  readonly callback: symbol
  readonly generator: symbol
}

let slots: OnReadSlots | null | undefined
const onReadSlots = (socket: Socket): OnReadSlots | undefined => {
  if (slots === undefined) {
    const named = (name: string) => Object.getOwnPropertySymbols(socket).find((symbol) => symbol.description === name)
    const buffer = named("kBuffer")
    const callback = named("kBufferCb")
    const generator = named("kBufferGen")
    slots = buffer !== undefined && callback !== undefined && generator !== undefined ? { buffer, callback, generator } : null
  }
  return slots ?? undefined
}

interface UserBufferHandle {
  useUserBuffer?: (buffer: Uint8Array) => void
}

/** Where a socket in user-buffer mode keeps its reader, for the read callback shared by every socket. */
const READER = Symbol("portal.reader")

/**
 * The buffer Node reads into next. Node calls a socket's read callback and then, at once, its buffer generator
 * (without telling it which socket): the shared callback leaves the answer here for the shared generator.
 */
let nextBuffer: Buffer | undefined
const nextReadBuffer = (): Buffer => nextBuffer ?? sharedReadBuffer()

/** The read callback of every socket in user-buffer mode (Node calls it with the socket as `this`). */
function onUserBufferRead(this: Socket, length: number, buffer: Buffer): void {
  const reader = (this as unknown as { [READER]?: UserBufferReader })[READER]
  nextBuffer = undefined
  if (reader === undefined) return
  reader.onRead(length, buffer)
  nextBuffer = reader.readBuffer()
}

/** Whether `socket` can be read in user-buffer mode (the internals are there). */
export const canReadWithUserBuffers = (socket: Socket): boolean =>
  onReadSlots(socket) !== undefined && (socket as unknown as { _handle?: UserBufferHandle | null })._handle?.useUserBuffer !== undefined

/**
 * From now on `socket`'s reads go to `reader` (false where Node does not offer it: nothing changed then). Bytes Node
 * had already read and nobody consumed are not part of it: take them with `socket.read()` first. The socket is left
 * flowing.
 */
export const readWithUserBuffers = (socket: Socket, reader: UserBufferReader): boolean => {
  const handle = (socket as unknown as { _handle?: UserBufferHandle | null })._handle
  const found = onReadSlots(socket)
  if (found === undefined || handle?.useUserBuffer === undefined) return false
  const target = socket as unknown as Record<symbol, unknown>
  target[READER] = reader
  target[found.buffer] = sharedReadBuffer()
  target[found.callback] = onUserBufferRead
  target[found.generator] = nextReadBuffer
  handle.useUserBuffer(sharedReadBuffer())
  // resume() alone does nothing on a stream Node already counts as flowing, whose reading may have stopped: pause
  // it first then (each costs a system call, so only then).
  if (socket.readableFlowing === true) socket.pause()
  socket.resume()
  return true
}

/**
 * Reads of `socket` from now on go nowhere. A closed socket can outlive its connection in the heap for a while: it
 * must not keep its reader, and through it the other socket and a buffer, alive with it (they would be promoted, at
 * connection rate).
 */
export const forgetReader = (socket: Socket): void => {
  ;(socket as unknown as Record<symbol, unknown>)[READER] = undefined
}
