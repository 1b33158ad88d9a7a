/**
 * One direction of a passthrough relay: bytes read from one socket are written to the other, with backpressure (a
 * destination that falls behind pauses the source until it catches up).
 *
 * Sockets read into memory Portal provides rather than through Node's default read path (relay/userBufferRead.ts
 * says why):
 * - A quiet direction reads into one buffer shared by every relay. When nothing waits on the destination, the bytes
 *   go to the kernel at once with one send(2) through the native addon: no copy, no write request, no callbacks.
 *   Otherwise (or without the addon) they are copied out (a small copy into Node's buffer pool) and written, because
 *   the next read of any socket reuses that buffer.
 * - A busy direction (a read that filled a large part of the shared buffer) gets a buffer of its own and writes
 *   straight from it. While such a write is still queued the source is paused, so a read never overwrites bytes
 *   that are waiting to leave. After a run of small reads it goes back to the shared buffer.
 * Where Node does not offer this (the internals are missing), the direction falls back to `data` events.
 */
import type { Socket } from "node:net"
import { type DirectSend, directSender } from "../native/addon.js"

export type { DirectSend } from "../native/addon.js"
import { tcpFdOf } from "../native/tcpHandle.js"
import { canReadWithUserBuffers, forgetReader, readWithUserBuffers, sharedReadBuffer, type UserBufferReader } from "./userBufferRead.js"

/** A read at least this large makes the direction busy. */
const BUSY_READ_BYTES = 16 * 1024
/** A busy direction's own buffer: larger reads mean fewer system calls per byte. */
const OWN_BYTES = 256 * 1024
/** Consecutive small reads after which a busy direction gives its own buffer back. */
const QUIET_READS = 16

/** What a relay can do with one direction (methods: called on the direction). */
export interface Direction {
  /** Bytes taken from the source since forwarding began (with what Node had read before), discarded ones too. */
  readonly bytesRead: number
  /** Bytes handed to the destination since forwarding began: sent, or queued on its socket. */
  readonly bytesHanded: number
  /** From now on, bytes read from the source are dropped (its peer is gone), and reading continues. */
  readonly discard: () => void
  /** Stops forwarding for good (the relay is ending). */
  readonly stop: () => void
}

/** The `data`-event forwarder: Node's allocation per read, but no reliance on its internals. */
class EventDirection implements Direction {
  bytesRead = 0
  bytesHanded = 0
  private readonly resume = () => this.from.resume()
  private readonly onData = (chunk: Buffer) => {
    this.bytesRead += chunk.length
    this.bytesHanded += chunk.length
    if (!this.to.write(chunk)) {
      this.from.pause()
      this.to.once("drain", this.resume)
    }
  }

  constructor(
    private readonly from: Socket,
    private readonly to: Socket
  ) {
    from.on("data", this.onData)
    // A socket paused while its handshake was read stays paused when a listener is added: resume it.
    from.resume()
  }

  discard(): void {
    this.stop()
    this.from.on("data", this.onDiscarded)
    this.from.resume()
  }

  private readonly onDiscarded = (chunk: Buffer) => {
    this.bytesRead += chunk.length
  }

  stop(): void {
    this.from.off("data", this.onData)
    this.to.off("drain", this.resume)
  }
}

export const forwardWithEvents = (from: Socket, to: Socket): Direction => new EventDirection(from, to)

/**
 * A direction reading into Portal's buffers. A class with shared callbacks rather than closures: every relayed
 * player has two of these for as long as it stays, idle or not.
 */
class UserBufferDirection implements Direction, UserBufferReader {
  bytesRead = 0
  bytesHanded = 0
  private mode: "forward" | "discard" | "stopped" = "forward"
  private own: Buffer | undefined = undefined
  private smallReads = 0
  /** Why the source is paused: the destination's buffer is full, or a write still holds `own`. */
  private waiting: "no" | "drain" | "write" = "no"
  private resumer: (() => void) | undefined = undefined

  constructor(
    private readonly from: Socket,
    private readonly to: Socket,
    /** Sends straight to `to`'s descriptor when nothing waits on it; undefined: always through `to.write`. */
    private readonly send: DirectSend | undefined,
    private readonly toFd: number
  ) {}

  readBuffer(): Buffer {
    return this.mode === "forward" && this.own !== undefined ? this.own : sharedReadBuffer()
  }

  onRead(length: number, buffer: Buffer): void {
    this.bytesRead += length
    if (this.mode !== "forward") return
    const { from, to } = this
    this.bytesHanded += length
    if (buffer !== this.own) {
      this.handOver(buffer, length)
      if (length >= BUSY_READ_BYTES) {
        this.own = Buffer.allocUnsafe(OWN_BYTES)
        this.smallReads = 0
      }
      if (to.writableNeedDrain) {
        from.pause()
        this.waiting = "drain"
        to.once("drain", this.resumeFunction())
      }
      return
    }
    to.write(buffer.subarray(0, length), this.resumeFunction())
    if (to.writableLength > 0) {
      // The write holds `own` until it leaves: read nothing into it until then. Its callback resumes.
      from.pause()
      this.waiting = "write"
      return
    }
    if (length >= BUSY_READ_BYTES) this.smallReads = 0
    else if (++this.smallReads >= QUIET_READS) this.own = undefined
  }

  /** Bytes in the shared buffer: to the kernel now if nothing waits before them, the rest copied and queued. */
  private handOver(buffer: Buffer, length: number): void {
    const { to, send } = this
    let sent = 0
    // Nothing queued in Node means nothing queued in libuv either, so a send here keeps the order of the bytes. A
    // destroyed socket's descriptor number may already belong to another connection: never send to it.
    if (send !== undefined && to.writableLength === 0 && !to.destroyed && !to.writableEnded) {
      sent = send(this.toFd, buffer, length)
      if (sent === length) return
      // An error (negative): the write below meets it too, and Node reports it as for any write.
      if (sent < 0) sent = 0
    }
    to.write(Buffer.from(buffer.subarray(sent, length)))
  }

  /** Resumes the source if it waits (for a drain or for a write's callback, whichever it waits for). */
  private resumeFunction(): () => void {
    return (this.resumer ??= () => {
      if (this.waiting === "no") return
      this.waiting = "no"
      if (this.mode !== "stopped") this.from.resume()
    })
  }

  discard(): void {
    if (this.mode === "stopped") return
    this.mode = "discard"
    this.own = undefined
    // A write that still holds `own` must leave before anything is read into it; its callback resumes then.
    if (this.waiting === "write") return
    // A source paused for a full destination reads again (into nowhere); one that reads needs nothing.
    if (this.waiting === "drain") {
      if (this.resumer !== undefined) this.to.off("drain", this.resumer)
      this.waiting = "no"
      this.from.resume()
    }
  }

  stop(): void {
    this.mode = "stopped"
    if (this.resumer !== undefined) this.to.off("drain", this.resumer)
    forgetReader(this.from)
    this.own = undefined
  }
}

export interface ForwardOptions {
  /**
   * Whether small packets may be sent straight to `to`'s descriptor (default: where the addon loaded), or the send
   * to use (tests make the kernel take less than asked).
   */
  readonly directSend?: boolean | DirectSend
}

/**
 * Starts forwarding `from` to `to`. Bytes `from` already read but nobody consumed (Node's readable buffer) go
 * first. `from` must not be read by anyone else from now on.
 */
export const forward = (from: Socket, to: Socket, options: ForwardOptions = {}): Direction => {
  if (!canReadWithUserBuffers(from)) return forwardWithEvents(from, to)
  const toFd = tcpFdOf(to)
  const { directSend: choice = true } = options
  const send = choice === false || toFd === undefined ? undefined : choice === true ? directSender() : choice
  const direction = new UserBufferDirection(from, to, send, toFd ?? -1)
  // What Node read before the switch comes first.
  for (let chunk = from.read() as Buffer | null; chunk !== null; chunk = from.read() as Buffer | null) {
    direction.bytesRead += chunk.length
    direction.bytesHanded += chunk.length
    to.write(chunk)
  }
  readWithUserBuffers(from, direction)
  return direction
}
