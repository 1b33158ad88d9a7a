/**
 * Malformed bytes from a peer. Codecs throw it internally while reading a buffer (PacketReader); the functions the
 * rest of Portal calls catch it and return an `Invalid` result (`decoding` in result.ts), so it never escapes into
 * an Effect as a throw. The session phases fail with it, as a typed error, when a client's bytes are malformed.
 * It carries no stack trace (quietError.ts).
 */
import { QuietError } from "./quietError.js"

export class ProtocolError extends QuietError("ProtocolError")<{ readonly reason: string }> {
  override get message() {
    return this.reason
  }
}
