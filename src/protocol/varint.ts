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
