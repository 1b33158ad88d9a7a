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

export class ConnectionClosed extends QuietError("ConnectionClosed")<{
  readonly during: string
  /** The peer never sent a byte: a port check or a client that gave up, not bad input. */
  readonly silent?: boolean
}> {
  override get message() {
    return this.silent === true ? `connection closed without a byte sent, waiting for ${this.during}` : `connection closed during ${this.during}`
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

/** Who is told when a read starts and stops waiting for the client (the flood bound's place, RateLimiter.ts). */
export interface WaitingWatcher {
  waiting(waiting: boolean): void
}

/**
 * What a read on callbacks parses with and reports to: one object for all the reads of a connection's opening
 * (session/opening.ts), so that a connection that waits holds no closure per step.
 */
export interface ReadClient<A, E> {
  parse(buffer: Buffer): Parse<A, E>
  readDone(value: A): void
  readFailed(error: ReadError | E): void
}

const onReaderTimeout = (reader: SocketReader, ms: number): void => reader.timedOut(ms)

/**
 * Bytes a client may send while Portal waits on something else for it (its backend dialled, its server woken): a
 * Minecraft client waits for the server's answer to its login and sends nothing meanwhile, so this is room to spare.
 */
export const WATCH_LIMIT_BYTES = 64 * 1024
/** The longest a Node timer waits: a watch ends with what it watches over, never by its own timer. */
const WATCH_MS = 2 ** 31 - 1
const nothingParsed = (): Parse<never, never> => needMore
const nothingDone = (): void => {}

export class SocketReader {
  private buffer: Buffer = Buffer.alloc(0)
  private ended = false
  /** Whether any byte ever arrived. */
  private heard = false
  /** The read waiting for bytes: its client, what it is for, its bound on buffered bytes, and its timer. */
  private pending: ReadClient<unknown, unknown> | undefined = undefined
  private during = ""
  private limit = 0
  private timer: NodeJS.Timeout | undefined = undefined
  /**
   * Told when a read starts waiting for the client and when it stops: the flood bound lets only a connection that
   * waits for its client give way to a newcomer (RateLimiter.enterHandshake).
   */
  onWaiting: WaitingWatcher | undefined = undefined
  /**
   * The socket's one listener while a read waits, for `data`, `end` and `close` alike (only `data` passes a Buffer):
   * made on the first wait, one closure instead of three. Not a property on the socket: Node's sockets would then
   * have two hidden classes (the players' and the backends'), and its code handling them got slower for it.
   */
  private listener: ((chunk?: unknown) => void) | undefined = undefined

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
   * `read` with callbacks: exactly one of `done` and `failed` is called, possibly before this returns, unless the
   * returned canceler runs first. One read at a time.
   */
  readThen<A, E>(
    during: string,
    limit: number,
    timeoutMs: number,
    parse: (buffer: Buffer) => Parse<A, E>,
    done: (value: A) => void,
    failed: (error: ReadError | E) => void
  ): () => void {
    const client: ReadClient<A, E> = { parse, readDone: done, readFailed: failed }
    this.readFor(during, limit, timeoutMs, client)
    return () => {
      if (this.pending === client) this.stop()
    }
  }

  /**
   * Watches the peer while Portal waits on something else for it: reads on (the bytes are kept for whatever comes
   * next), so that a peer that closes is noticed at once; `gone` is called with why when it closes or sends more than
   * `limit` bytes. Returns the canceler. One read at a time.
   */
  watch(during: string, limit: number, gone: (why: string) => void): () => void {
    return this.readThen(during, limit, WATCH_MS, nothingParsed, nothingDone, (error) => gone(error.message))
  }

  /** `watch` as an Effect that succeeds with why once the peer is gone (interrupting it stops the watch). */
  gone(during: string, limit: number): Effect.Effect<string> {
    return Effect.async<string>((resume) => Effect.sync(this.watch(during, limit, (why) => resume(Effect.succeed(why)))))
  }

  /**
   * `read` for a client object, for a connection that has no fiber yet (its opening, session/opening.ts): exactly one
   * of its `readDone` and `readFailed` is called, possibly before this returns. One read at a time.
   */
  readFor<A, E>(during: string, limit: number, timeoutMs: number, client: ReadClient<A, E>): void {
    const first = this.settle(client, during, limit)
    if (first !== undefined) return deliver(client, first)
    this.pending = client as ReadClient<unknown, unknown>
    this.during = during
    this.limit = limit
    this.timer = setTimeout(onReaderTimeout, timeoutMs, this, timeoutMs)
    const listener = (this.listener ??= (chunk) => (chunk instanceof Buffer ? this.received(chunk) : this.closed()))
    this.socket.on("data", listener)
    this.socket.on("end", listener)
    // An error always ends in close (the socket is destroyed), so close covers it.
    this.socket.on("close", listener)
    this.socket.resume()
    this.onWaiting?.waiting(true)
  }

  /** The read's outcome from what is buffered: parsed, failed, too large, or the peer gone; undefined while more is needed. */
  private settle<A, E>(client: ReadClient<A, E>, during: string, limit: number): Parse<A, ReadError | E> | undefined {
    const result = client.parse(this.buffer)
    switch (result._tag) {
      case "Done":
        this.buffer = this.buffer.subarray(result.consumed)
        return result
      case "Fail":
        return result
      case "NeedMore":
        if (this.buffer.length > limit) return failParse(new InputTooLarge({ during, limit }))
        if (this.ended) return failParse(this.closedError(during))
        return undefined
    }
  }

  /** Ends the waiting read's listening; its callback is called after, so the next read it starts is not undone. */
  private stop(): ReadClient<unknown, unknown> | undefined {
    const client = this.pending
    this.pending = undefined
    clearTimeout(this.timer)
    this.timer = undefined
    const listener = this.listener
    if (listener !== undefined) {
      this.socket.off("data", listener)
      this.socket.off("end", listener)
      this.socket.off("close", listener)
    }
    this.socket.pause()
    if (client !== undefined) this.onWaiting?.waiting(false)
    return client
  }

  private closedError(during: string): ConnectionClosed {
    return new ConnectionClosed({ during, silent: !this.heard })
  }

  /** Bytes from the socket. */
  private received(chunk: Buffer): void {
    this.heard = true
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk])
    const client = this.pending
    if (client === undefined) return
    const outcome = this.settle(client, this.during, this.limit)
    if (outcome === undefined) return
    this.stop()
    deliver(client, outcome)
  }

  /** The peer ended or the socket closed. */
  private closed(): void {
    this.ended = true
    const during = this.during
    const client = this.stop()
    if (client !== undefined) client.readFailed(this.closedError(during))
  }

  /** The waiting read's time is up (its timer, which passes the reader: no closure for it). */
  timedOut(ms: number): void {
    const during = this.during
    const client = this.stop()
    if (client !== undefined) client.readFailed(new ReadTimeout({ during, ms }))
  }
}

const deliver = <A, E>(client: ReadClient<A, E>, outcome: Parse<A, ReadError | E>): void => {
  if (outcome._tag === "Done") client.readDone(outcome.value)
  else if (outcome._tag === "Fail") client.readFailed(outcome.error)
}


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
