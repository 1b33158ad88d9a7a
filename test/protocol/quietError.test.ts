/** Errors a peer causes every day: made without a stack trace, otherwise what Data.TaggedError makes. */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { describe, expect, it } from "vitest"
import { ProtocolError } from "../../src/protocol/ProtocolError.js"
import { QuietError } from "../../src/protocol/quietError.js"
import { ConnectionClosed, ReadTimeout } from "../../src/services/net/SocketReader.js"

class Sample extends QuietError("Sample")<{ readonly what: string; readonly count: number }> {}

describe("QuietError", () => {
  it("keeps the tag, the fields, the message and Error's prototype", () => {
    const error = new ProtocolError({ reason: "bad varint" })
    expect(error).toBeInstanceOf(Error)
    expect(error).toBeInstanceOf(ProtocolError)
    expect(error._tag).toBe("ProtocolError")
    expect(error.reason).toBe("bad varint")
    expect(error.message).toBe("bad varint")
    const sample = new Sample({ what: "x", count: 2 })
    expect([sample._tag, sample.what, sample.count]).toEqual(["Sample", "x", 2])
  })

  it("captures no stack frames, and leaves Error.stackTraceLimit as it was", () => {
    const before = Error.stackTraceLimit
    const error = new ReadTimeout({ during: "the handshake", ms: 5000 })
    expect(error.stack).toBe("ReadTimeout: timed out after 5000 ms waiting for the handshake")
    expect(new Error("ordinary").stack?.split("\n").length).toBeGreaterThan(1)
    expect(Error.stackTraceLimit).toBe(before)
  })

  it("restores Error.stackTraceLimit when the constructor throws", () => {
    const before = Error.stackTraceLimit
    const Throwing = QuietError("Throwing")
    // A getter that throws while Data.TaggedError copies the fields in.
    const args = Object.defineProperty({}, "boom", {
      enumerable: true,
      get() {
        throw new Error("no")
      }
    })
    expect(() => new Throwing(args as never)).toThrow("no")
    expect(Error.stackTraceLimit).toBe(before)
  })

  it("fails an Effect as a typed error, yielded or passed to Effect.fail", () => {
    const yielded = Effect.runSync(Effect.either(Effect.gen(function* () {
      return yield* new ConnectionClosed({ during: "Login Start" })
    })))
    expect(Either.isLeft(yielded) && yielded.left._tag).toBe("ConnectionClosed")
    const failed = Effect.runSync(Effect.either(Effect.fail(new ProtocolError({ reason: "r" }))))
    expect(Either.isLeft(failed) && failed.left.message).toBe("r")
  })
})
