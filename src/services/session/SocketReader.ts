/**
 * Reading the first bytes of a connection (PROXY header, handshake, Login Start, status packets) from a Node socket
 * into Effect: each read is interruptible (its canceler removes the listeners), bounded in size, and keeps the
 * bytes that arrived beyond what it parsed for the next read or for the relay.
 */
import { Data, Effect } from "effect"
import type { Socket } from "node:net"

export class ConnectionClosed extends Data.TaggedError("ConnectionClosed")<{ readonly during: string }> {
  override get message() {
    return `connection closed during ${this.during}`
  }
}

export class InputTooLarge extends Data.TaggedError("InputTooLarge")<{ readonly during: string; readonly limit: number }> {
  override get message() {
    return `more than ${this.limit} bytes during ${this.during}`
  }
}

/** What a parse step says about the bytes buffered so far. */
export type Parse<A> =
  | { readonly _tag: "Done"; readonly value: A; readonly consumed: number }
  | { readonly _tag: "NeedMore" }
  | { readonly _tag: "Fail"; readonly error: Error }

export const done = <A>(value: A, consumed: number): Parse<A> => ({ _tag: "Done", value, consumed })
export const needMore: Parse<never> = { _tag: "NeedMore" }
export const failParse = (error: Error): Parse<never> => ({ _tag: "Fail", error })

export class SocketReader {
  private buffer: Buffer = Buffer.alloc(0)
  private ended = false

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
   * Fails when the peer closes first or more than `limit` bytes are buffered without a result.
   */
  read<A>(during: string, limit: number, parse: (buffer: Buffer) => Parse<A>): Effect.Effect<A, ConnectionClosed | InputTooLarge | Error> {
    return Effect.async<A, ConnectionClosed | InputTooLarge | Error>((resume) => {
      const socket = this.socket
      const attempt = (): boolean => {
        const result = parse(this.buffer)
        switch (result._tag) {
          case "Done":
            this.buffer = this.buffer.subarray(result.consumed)
            resume(Effect.succeed(result.value))
            return true
          case "Fail":
            resume(Effect.fail(result.error))
            return true
          case "NeedMore":
            if (this.buffer.length > limit) {
              resume(Effect.fail(new InputTooLarge({ during, limit })))
              return true
            }
            if (this.ended) {
              resume(Effect.fail(new ConnectionClosed({ during })))
              return true
            }
            return false
        }
      }
      if (attempt()) return
      const cleanup = () => {
        socket.off("data", onData)
        socket.off("end", onEnd)
        socket.off("close", onEnd)
        socket.off("error", onEnd)
        socket.pause()
      }
      const onData = (chunk: Buffer) => {
        this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk])
        if (attempt()) cleanup()
      }
      const onEnd = () => {
        this.ended = true
        cleanup()
        resume(Effect.fail(new ConnectionClosed({ during })))
      }
      socket.on("data", onData)
      socket.once("end", onEnd)
      socket.once("close", onEnd)
      socket.once("error", onEnd)
      socket.resume()
      return Effect.sync(cleanup)
    })
  }
}

/** Writes bytes and waits until Node has handed them to the kernel (or the socket failed). */
export const writeAll = (socket: Socket, data: Buffer): Effect.Effect<void, Error> =>
  Effect.async<void, Error>((resume) => {
    if (socket.destroyed) {
      resume(Effect.fail(new Error("socket already closed")))
      return
    }
    socket.write(data, (error) => resume(error ? Effect.fail(error) : Effect.void))
  })
