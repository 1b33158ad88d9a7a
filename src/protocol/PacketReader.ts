/** Reading Minecraft wire types from a Buffer; every read checks bounds and throws ProtocolError on bad input. */
import { ProtocolError } from "./ProtocolError.js"
import { MAX_VARINT_BYTES, readVarLong } from "./varint.js"

export class PacketReader {
  constructor(
    readonly buffer: Buffer,
    public offset = 0,
    readonly end = buffer.length
  ) {}

  get remaining(): number {
    return this.end - this.offset
  }

  private need(bytes: number, what: string): void {
    if (this.offset + bytes > this.end) throw new ProtocolError({ reason: `truncated ${what}` })
  }

  varInt(what = "VarInt"): number {
    let value = 0
    for (let i = 0; i < MAX_VARINT_BYTES; i++) {
      this.need(1, what)
      const byte = this.buffer[this.offset++]!
      value |= (byte & 0x7f) << (7 * i)
      if ((byte & 0x80) === 0) return value
    }
    throw new ProtocolError({ reason: `${what} longer than ${MAX_VARINT_BYTES} bytes` })
  }

  /** A VarInt-prefixed UTF-8 string of at most `maxChars` characters (the protocol's limit). */
  string(maxChars: number, what = "string"): string {
    const length = this.varInt(`${what} length`)
    if (length < 0 || length > maxChars * 3) throw new ProtocolError({ reason: `${what} of ${length} bytes is too long` })
    this.need(length, what)
    const text = this.buffer.toString("utf8", this.offset, this.offset + length)
    this.offset += length
    if (text.length > maxChars) throw new ProtocolError({ reason: `${what} of ${text.length} characters is too long` })
    return text
  }

  u8(what = "byte"): number {
    this.need(1, what)
    return this.buffer[this.offset++]!
  }

  bool(what = "boolean"): boolean {
    return this.u8(what) !== 0
  }

  u16(what = "u16"): number {
    this.need(2, what)
    const value = this.buffer.readUInt16BE(this.offset)
    this.offset += 2
    return value
  }

  i32(what = "i32"): number {
    this.need(4, what)
    const value = this.buffer.readInt32BE(this.offset)
    this.offset += 4
    return value
  }

  i64(what = "i64"): bigint {
    this.need(8, what)
    const value = this.buffer.readBigInt64BE(this.offset)
    this.offset += 8
    return value
  }

  bytes(length: number, what = "bytes"): Buffer {
    if (length < 0) throw new ProtocolError({ reason: `negative length of ${what}` })
    this.need(length, what)
    const out = this.buffer.subarray(this.offset, this.offset + length)
    this.offset += length
    return out
  }

  i8(what = "byte"): number {
    this.need(1, what)
    return this.buffer.readInt8(this.offset++)
  }

  i16(what = "i16"): number {
    this.need(2, what)
    const value = this.buffer.readInt16BE(this.offset)
    this.offset += 2
    return value
  }

  varLong(what = "VarLong"): bigint {
    const read = readVarLong(this.buffer, this.offset, this.end)
    if (read._tag === "Incomplete") throw new ProtocolError({ reason: `truncated ${what}` })
    if (read._tag === "Invalid") throw new ProtocolError({ reason: `${what}: ${read.reason}` })
    this.offset += read.size
    return read.value
  }

  /** A VarInt-prefixed byte array of at most `maxBytes` (a view, not a copy). */
  byteArray(maxBytes: number, what = "byte array"): Buffer {
    const length = this.varInt(`${what} length`)
    if (length < 0 || length > maxBytes) throw new ProtocolError({ reason: `${what} of ${length} bytes (at most ${maxBytes})` })
    return this.bytes(length, what)
  }

  /** An i16-prefixed byte array, as 1.7 writes them (a view, not a copy). */
  shortByteArray(maxBytes: number, what = "byte array"): Buffer {
    const length = this.i16(`${what} length`)
    if (length < 0 || length > maxBytes) throw new ProtocolError({ reason: `${what} of ${length} bytes (at most ${maxBytes})` })
    return this.bytes(length, what)
  }

  /** An optional field: a boolean, then the value when it is true. */
  optional<A>(read: (reader: this) => A, what = "presence flag"): A | undefined {
    return this.bool(what) ? read(this) : undefined
  }

  /** Everything left (a view). */
  rest(): Buffer {
    return this.bytes(this.remaining)
  }

  /** Packets with a fixed layout must end exactly where their last field does. */
  expectEnd(what: string): void {
    if (this.remaining !== 0) throw new ProtocolError({ reason: `${this.remaining} unexpected bytes after ${what}` })
  }

  /** A 128-bit UUID, returned in its dashed text form. */
  uuid(what = "UUID"): string {
    return formatUuid(this.bytes(16, what))
  }
}

export const formatUuid = (bytes: Buffer): string => {
  const hex = bytes.toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}
