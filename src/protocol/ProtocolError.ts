/** Malformed bytes from a peer. Thrown only inside codecs; the decode functions return it as a value. */
export class ProtocolError extends Error {
  override readonly name = "ProtocolError"
}
