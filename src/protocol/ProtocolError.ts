/**
 * Malformed bytes from a peer. Codecs throw it internally while reading a buffer; the functions the rest of Portal
 * calls catch it and return it as a value (see `decodeWith`), so it never escapes into an Effect as a throw.
 */
import * as Data from "effect/Data"

export class ProtocolError extends Data.TaggedError("ProtocolError")<{ readonly reason: string }> {
  override get message() {
    return this.reason
  }
}

/** The outcome of decoding bytes that may be malformed. */
export type Decoded<A> = { readonly _tag: "Ok"; readonly value: A } | { readonly _tag: "Invalid"; readonly error: ProtocolError }

/** Runs a codec that reads with `PacketReader` and turns its ProtocolError into a value; other throws are bugs. */
export const decodeWith = <A>(decode: () => A): Decoded<A> => {
  try {
    return { _tag: "Ok", value: decode() }
  } catch (error) {
    if (error instanceof ProtocolError) return { _tag: "Invalid", error }
    throw error
  }
}
