/** VarInt: 7 bits per byte, least significant group first, high bit = more; at most 5 bytes for an int. */

export const MAX_VARINT_BYTES = 5

export type VarIntRead =
  | { readonly _tag: "Value"; readonly value: number; readonly size: number }
  | { readonly _tag: "Incomplete" }
  | { readonly _tag: "Invalid"; readonly reason: string }

const INCOMPLETE: VarIntRead = { _tag: "Incomplete" }

/** Reads a VarInt at `offset` without throwing: the bytes may not have arrived yet. */
export const readVarInt = (buffer: Buffer, offset = 0, end = buffer.length): VarIntRead => {
  let value = 0
  for (let i = 0; i < MAX_VARINT_BYTES; i++) {
    if (offset + i >= end) return INCOMPLETE
    const byte = buffer[offset + i]!
    value |= (byte & 0x7f) << (7 * i)
    if ((byte & 0x80) === 0) return { _tag: "Value", value, size: i + 1 }
  }
  return { _tag: "Invalid", reason: `VarInt longer than ${MAX_VARINT_BYTES} bytes` }
}

export const varIntSize = (value: number): number => {
  let v = value >>> 0
  let size = 1
  while (v >= 0x80) {
    v >>>= 7
    size++
  }
  return size
}

export const writeVarIntInto = (target: Buffer, value: number, offset: number): number => {
  let v = value >>> 0
  while (v >= 0x80) {
    target[offset++] = (v & 0x7f) | 0x80
    v >>>= 7
  }
  target[offset++] = v
  return offset
}

export const encodeVarInt = (value: number): Buffer => {
  const out = Buffer.alloc(varIntSize(value))
  writeVarIntInto(out, value, 0)
  return out
}

/** VarLong: the same encoding over 64 bits, at most 10 bytes; values are signed 64-bit, as the protocol's longs. */
export const MAX_VARLONG_BYTES = 10

export type VarLongRead =
  | { readonly _tag: "Value"; readonly value: bigint; readonly size: number }
  | { readonly _tag: "Incomplete" }
  | { readonly _tag: "Invalid"; readonly reason: string }

export const readVarLong = (buffer: Buffer, offset = 0, end = buffer.length): VarLongRead => {
  let value = 0n
  for (let i = 0; i < MAX_VARLONG_BYTES; i++) {
    if (offset + i >= end) return INCOMPLETE as VarLongRead
    const byte = buffer[offset + i]!
    value |= BigInt(byte & 0x7f) << BigInt(7 * i)
    if ((byte & 0x80) === 0) return { _tag: "Value", value: BigInt.asIntN(64, value), size: i + 1 }
  }
  return { _tag: "Invalid", reason: `VarLong longer than ${MAX_VARLONG_BYTES} bytes` }
}

export const encodeVarLong = (value: bigint): Buffer => {
  let v = BigInt.asUintN(64, value)
  const bytes: Array<number> = []
  while (v >= 0x80n) {
    bytes.push(Number(v & 0x7fn) | 0x80)
    v >>= 7n
  }
  bytes.push(Number(v))
  return Buffer.from(bytes)
}
