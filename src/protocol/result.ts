/** Results of the codecs: bad bytes from a peer come back as `Invalid` values, never as exceptions. */
import { ProtocolError } from "./ProtocolError.js"

export interface Invalid {
  readonly _tag: "Invalid"
  readonly reason: string
}

export interface Ok<A> {
  readonly _tag: "Ok"
  readonly value: A
}

export type Decoded<A> = Ok<A> | Invalid

export const invalid = (reason: string): Invalid => ({ _tag: "Invalid", reason })

export const ok = <A>(value: A): Ok<A> => ({ _tag: "Ok", value })

/**
 * Runs a decoder written with PacketReader (which throws ProtocolError on bad input) and returns any failure as
 * `Invalid`. Every error is caught, not only ProtocolError: a caller inside Effect must never see a throw from bytes.
 */
export const decoding = <A>(what: string, run: () => A): Decoded<A> => {
  try {
    return ok(run())
  } catch (error) {
    const message = error instanceof ProtocolError ? error.message : error instanceof Error ? error.message : String(error)
    return invalid(`${what}: ${message}`)
  }
}
