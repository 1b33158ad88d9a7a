/**
 * Reading the first bytes of a connection (PROXY header, handshake, Login Start, status packets) from a Node socket
 * into Effect: each read is interruptible (its canceler removes the listeners), bounded in size, and keeps the
 * bytes that arrived beyond what it parsed for the next read or for the relay.
 */
import * as Effect from "effect/Effect"
import type { Socket } from "node:net"
import { readFrame } from "../../protocol/frame.js"
import { ProtocolError } from "../../protocol/ProtocolError.js"
import { QuietError } from "../../protocol/quietError.js"
import { decoding } from "../../protocol/result.js"

export class ConnectionClosed extends QuietError("ConnectionClosed")<{ readonly during: string }> {
  override get message() {
    return `connection closed during ${this.during}`
  }
}

export class ReadTimeout extends QuietError("ReadTimeout")<{ readonly during: string; readonly ms: number }> {
  override get message() {
    return `timed out after ${this.ms} ms waiting for ${this.during}`
  }
}

export class InputTooLarge extends QuietError("InputTooLarge")<{ readonly during: string; readonly limit: number }> {
  override get message() {
    return `more than ${this.limit} bytes during ${this.during}`
  }
}

/** What a parse step says about the bytes buffered so far; a failure is malformed input (ProtocolError by default). */
export type Parse<A, E = ProtocolError> =
  | { readonly _tag: "Done"; readonly value: A; readonly consumed: number }
  | { readonly _tag: "NeedMore" }
  | { readonly _tag: "Fail"; readonly error: E }

export const done = <A>(value: A, consumed: number): Parse<A, never> => ({ _tag: "Done", value, consumed })
export const needMore: Parse<never, never> = { _tag: "NeedMore" }
export const failParse = <E>(error: E): Parse<never, E> => ({ _tag: "Fail", error })
/** A parse step's failure from a reason. */
export const failWith = (reason: string): Parse<never> => ({ _tag: "Fail", error: new ProtocolError({ reason }) })

/** Why reading the opening bytes of a connection failed. */
export type ReadError = ConnectionClosed | InputTooLarge | ReadTimeout | ProtocolError

export class SocketReader {
  private buffer: Buffer = Buffer.alloc(0)
  private ended = false
  /** The read waiting for bytes, and its timer. */
  private pending: PendingRead<unknown, unknown> | undefined = undefined
  private timer: NodeJS.Timeout | undefined = undefined
  /**
   * Told when a read starts waiting for the client and when it stops: the flood bound lets only a connection that
   * waits for its client give way to a newcomer (RateLimiter.enterHandshake).
   */
  onWaiting: ((waiting: boolean) => void) | undefined = undefined

  constructor(readonly socket: Socket) {
    // Until the first read the socket must not flow: bytes wait in the kernel and Node's buffer.
    socket.pause()
  }

  /** Bytes received but not consumed by any parse; they belong to whatever comes next. */
  takeBuffered(): Buffer {
    const out = this.buffer
    this.buffer = Buffer.alloc(0)
    return out
  }

  peekBuffered(): Buffer {
    return this.buffer
  }

  /**
   * Runs `parse` over the buffered bytes until it is done, reading more from the socket as needed.
   * Fails when the peer closes first, more than `limit` bytes are buffered without a result, or `timeoutMs` passes.
   * The timeout is a plain timer rather than Effect.timeout: this runs for every connection, and forking a fiber
   * to race each read costs more than the read.
   */
  read<A, E = ProtocolError>(
    during: string,
    limit: number,
    timeoutMs: number,
    parse: (buffer: Buffer) => Parse<A, E>
  ): Effect.Effect<A, ReadError | E> {
    return Effect.suspend(() => {
      // Often the bytes are here already (Login Start comes in the same segment as the handshake): no suspension then.
      const ready = this.buffer.length > 0 ? parse(this.buffer) : needMore
      if (ready._tag === "Done") {
        this.buffer = this.buffer.subarray(ready.consumed)
        return Effect.succeed(ready.value)
      }
      if (ready._tag === "Fail") return Effect.fail(ready.error)
      return this.wait(during, limit, timeoutMs, parse)
    })
  }

  private wait<A, E>(
    during: string,
    limit: number,
    timeoutMs: number,
    parse: (buffer: Buffer) => Parse<A, E>
  ): Effect.Effect<A, ReadError | E> {
    return Effect.async<A, ReadError | E>((resume) => {
      const cancel = this.readThen(
        during,
        limit,
        timeoutMs,
        parse,
        (value) => resume(Effect.succeed(value)),
        (error) => resume(Effect.fail(error))
      )
      return Effect.sync(cancel)
    })
  }

  /**
   * `read` with callbacks, for a connection that has no fiber yet (its opening, session/opening.ts): exactly one of
   * `done` and `failed` is called, possibly before this returns, unless the returned canceler runs first. One read
   * at a time.
   */
  readThen<A, E>(
    during: string,
    limit: number,
    timeoutMs: number,
    parse: (buffer: Buffer) => Parse<A, E>,
    done: (value: A) => void,
    failed: (error: ReadError | E) => void
  ): () => void {
    const read: PendingRead<A, E> = { during, limit, parse, done, failed }
    const first = this.settle(read)
    if (first !== undefined) {
      deliver(read, first)
      return noCancel
    }
    this.pending = read as PendingRead<unknown, unknown>
    this.timer = setTimeout(this.onTimeout, timeoutMs, timeoutMs)
    this.socket.on("data", this.onData)
    this.socket.on("end", this.onEnd)
    // An error always ends in close (the socket is destroyed), so close covers it.
    this.socket.on("close", this.onEnd)
    this.socket.resume()
    this.onWaiting?.(true)
    return () => {
      if (this.pending === read) this.stop()
    }
  }

  /** The read's outcome from what is buffered: parsed, failed, too large, or the peer gone; undefined while more is needed. */
  private settle<A, E>(read: PendingRead<A, E>): Parse<A, ReadError | E> | undefined {
    const result = read.parse(this.buffer)
    switch (result._tag) {
      case "Done":
        this.buffer = this.buffer.subarray(result.consumed)
        return result
      case "Fail":
        return result
      case "NeedMore":
        if (this.buffer.length > read.limit) return failParse(new InputTooLarge({ during: read.during, limit: read.limit }))
        if (this.ended) return failParse(new ConnectionClosed({ during: read.during }))
        return undefined
    }
  }

  /** Ends the waiting read's listening; its callback is called after, so the next read it starts is not undone. */
  private stop(): PendingRead<unknown, unknown> | undefined {
    const read = this.pending
    this.pending = undefined
    clearTimeout(this.timer)
    this.timer = undefined
    this.socket.off("data", this.onData)
    this.socket.off("end", this.onEnd)
    this.socket.off("close", this.onEnd)
    this.socket.pause()
    if (read !== undefined) this.onWaiting?.(false)
    return read
  }

  // Made once per reader, not per read: a flood's connections are mostly a read or two that never completes.
  private readonly onData = (chunk: Buffer): void => {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk])
    const read = this.pending
    if (read === undefined) return
    const outcome = this.settle(read)
    if (outcome === undefined) return
    this.stop()
    deliver(read, outcome)
  }

  private readonly onEnd = (): void => {
    this.ended = true
    const read = this.stop()
    if (read !== undefined) read.failed(new ConnectionClosed({ during: read.during }))
  }

  private readonly onTimeout = (ms: number): void => {
    const read = this.stop()
    if (read !== undefined) read.failed(new ReadTimeout({ during: read.during, ms }))
  }
}

/** A read waiting for more bytes. */
interface PendingRead<A, E> {
  readonly during: string
  readonly limit: number
  readonly parse: (buffer: Buffer) => Parse<A, E>
  readonly done: (value: A) => void
  readonly failed: (error: ReadError | E) => void
}

const deliver = <A, E>(read: PendingRead<A, E>, outcome: Parse<A, ReadError | E>): void => {
  if (outcome._tag === "Done") read.done(outcome.value)
  else if (outcome._tag === "Fail") read.failed(outcome.error)
}

const noCancel = (): void => {}

export class WriteFailed extends QuietError("WriteFailed")<{ readonly reason: string }> {
  override get message() {
    return `write failed: ${this.reason}`
  }
}

/** Writes bytes and waits until Node has handed them to the kernel (or the socket failed). */
export const writeAll = (socket: Socket, data: Buffer): Effect.Effect<void, WriteFailed> =>
  Effect.async<void, WriteFailed>((resume) => {
    if (socket.destroyed) {
      resume(Effect.fail(new WriteFailed({ reason: "the socket is already closed" })))
      return
    }
    socket.write(data, (error) => resume(error ? Effect.fail(new WriteFailed({ reason: error.message })) : Effect.void))
  })

/**
 * A parse step for one uncompressed frame with the expected id, decoded by `decode` (a PacketReader codec that may
 * throw on malformed bytes, which becomes the step's failure); the frame's bytes come with the value.
 */
export const framedPacket =
  <A>(expectedId: number, maxBytes: number, decode: (body: Buffer) => A) =>
  (buffer: Buffer): Parse<{ readonly value: A; readonly raw: Buffer }> => {
    const frame = readFrame(buffer, 0, maxBytes)
    if (frame._tag === "Incomplete") return needMore
    if (frame._tag === "Invalid") return failWith(frame.reason)
    if (frame.packetId !== expectedId) return failWith(`expected packet ${expectedId}, got ${frame.packetId}`)
    const decoded = decoding(`packet ${expectedId}`, () => decode(buffer.subarray(frame.bodyStart, frame.end)))
    if (decoded._tag === "Invalid") return failWith(decoded.reason)
    return done({ value: decoded.value, raw: buffer.subarray(0, frame.end) }, frame.end)
  }
