/** Building packets: fields appended in order, framed with a VarInt length at the end. */
import { encodeVarInt, encodeVarLong } from "./varint.js"

/**
 * A frame of 254 bytes starts `FE 01`, which servers that detect legacy pings carelessly take for a 1.4 ping.
 * Its length is then written as the equally valid three-byte VarInt `FE 81 00`.
 */
export const frameLength = (length: number): Buffer => (length === 254 ? Buffer.from([0xfe, 0x81, 0x00]) : encodeVarInt(length))

export class PacketWriter {
  private readonly parts: Array<Buffer> = []

  varInt(value: number): this {
    this.parts.push(encodeVarInt(value))
    return this
  }

  string(text: string): this {
    const bytes = Buffer.from(text, "utf8")
    this.parts.push(encodeVarInt(bytes.length), bytes)
    return this
  }

  u16(value: number): this {
    const out = Buffer.alloc(2)
    out.writeUInt16BE(value)
    this.parts.push(out)
    return this
  }

  i64(value: bigint): this {
    const out = Buffer.alloc(8)
    out.writeBigInt64BE(value)
    this.parts.push(out)
    return this
  }

  i8(value: number): this {
    const out = Buffer.alloc(1)
    out.writeInt8(value)
    this.parts.push(out)
    return this
  }

  i16(value: number): this {
    const out = Buffer.alloc(2)
    out.writeInt16BE(value)
    this.parts.push(out)
    return this
  }

  i32(value: number): this {
    const out = Buffer.alloc(4)
    out.writeInt32BE(value)
    this.parts.push(out)
    return this
  }

  varLong(value: bigint): this {
    this.parts.push(encodeVarLong(value))
    return this
  }

  /** A VarInt-prefixed byte array. */
  byteArray(bytes: Buffer): this {
    this.parts.push(encodeVarInt(bytes.length), bytes)
    return this
  }

  /** An i16-prefixed byte array (1.7). */
  shortByteArray(bytes: Buffer): this {
    return this.i16(bytes.length).bytes(bytes)
  }

  bool(value: boolean): this {
    this.parts.push(Buffer.from([value ? 1 : 0]))
    return this
  }

  bytes(bytes: Buffer): this {
    this.parts.push(bytes)
    return this
  }

  uuid(text: string): this {
    this.parts.push(Buffer.from(text.replace(/-/g, ""), "hex"))
    return this
  }

  /** An optional field: `true` and the value, or `false`. */
  optional<A>(value: A | undefined, write: (writer: this, value: A) => void): this {
    if (value === undefined) return this.bool(false)
    this.bool(true)
    write(this, value)
    return this
  }

  /** The fields alone: a packet body, framed later with the id of the connection's version (see framing.ts). */
  body(): Buffer {
    return Buffer.concat(this.parts)
  }

  /** The packet framed as `VarInt length | packetId | fields`. */
  frame(packetId: number): Buffer {
    const body = Buffer.concat([encodeVarInt(packetId), ...this.parts])
    return Buffer.concat([frameLength(body.length), body])
  }
}
