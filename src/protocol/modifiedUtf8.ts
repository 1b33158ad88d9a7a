/**
 * Java's "modified UTF-8" (DataOutput.writeUTF, NBT strings): U+0000 as `C0 80`, characters outside the BMP as two
 * 3-byte surrogates, everything else as UTF-8. Strings carry a u16 byte length, so at most 65535 bytes.
 */
import { type Invalid, invalid } from "./result.js"

export const MAX_MODIFIED_UTF8_BYTES = 65_535

export const modifiedUtf8Length = (text: string): number => {
  let length = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    length += c >= 0x01 && c <= 0x7f ? 1 : c <= 0x7ff ? 2 : 3
  }
  return length
}

/** Writes the bytes (no length prefix) at `offset`; returns the offset after them. */
export const writeModifiedUtf8 = (text: string, target: Buffer, offset: number): number => {
  let at = offset
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c >= 0x01 && c <= 0x7f) {
      target[at++] = c
    } else if (c <= 0x7ff) {
      target[at++] = 0xc0 | (c >> 6)
      target[at++] = 0x80 | (c & 0x3f)
    } else {
      target[at++] = 0xe0 | (c >> 12)
      target[at++] = 0x80 | ((c >> 6) & 0x3f)
      target[at++] = 0x80 | (c & 0x3f)
    }
  }
  return at
}

/** The longest prefix of `text` that fits in `maxBytes`, cut between characters (a surrogate pair stays whole). */
export const clampModifiedUtf8 = (text: string, maxBytes = MAX_MODIFIED_UTF8_BYTES): string => {
  let length = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    length += c >= 0x01 && c <= 0x7f ? 1 : c <= 0x7ff ? 2 : 3
    if (length > maxBytes) {
      const cut = i > 0 && c >= 0xdc00 && c <= 0xdfff ? i - 1 : i
      return text.slice(0, cut)
    }
  }
  return text
}

/** `u16 length | bytes`, as writeUTF; Invalid when the text needs more than 65535 bytes (Java throws there). */
export const encodeJavaUtf = (text: string): Buffer | Invalid => {
  const length = modifiedUtf8Length(text)
  if (length > MAX_MODIFIED_UTF8_BYTES) return invalid(`string of ${length} bytes is too long for writeUTF`)
  const out = Buffer.allocUnsafe(2 + length)
  out.writeUInt16BE(length, 0)
  writeModifiedUtf8(text, out, 2)
  return out
}

/** Decodes `length` bytes at `offset` as DataInput.readUTF does; Invalid on a malformed sequence. */
export const decodeModifiedUtf8 = (bytes: Buffer, offset: number, length: number): string | Invalid => {
  const end = offset + length
  if (end > bytes.length) return invalid("truncated string")
  const units: Array<number> = []
  let text = ""
  let i = offset
  while (i < end) {
    const a = bytes[i]!
    if (a < 0x80) {
      units.push(a)
      i += 1
    } else if ((a & 0xe0) === 0xc0) {
      if (i + 1 >= end) return invalid("malformed modified UTF-8: partial character at end")
      const b = bytes[i + 1]!
      if ((b & 0xc0) !== 0x80) return invalid(`malformed modified UTF-8 around byte ${i - offset}`)
      units.push(((a & 0x1f) << 6) | (b & 0x3f))
      i += 2
    } else if ((a & 0xf0) === 0xe0) {
      if (i + 2 >= end) return invalid("malformed modified UTF-8: partial character at end")
      const b = bytes[i + 1]!
      const c = bytes[i + 2]!
      if ((b & 0xc0) !== 0x80 || (c & 0xc0) !== 0x80) return invalid(`malformed modified UTF-8 around byte ${i - offset}`)
      units.push(((a & 0x0f) << 12) | ((b & 0x3f) << 6) | (c & 0x3f))
      i += 3
    } else {
      return invalid(`malformed modified UTF-8 around byte ${i - offset}`)
    }
    if (units.length >= 4096) {
      text += String.fromCharCode(...units)
      units.length = 0
    }
  }
  return text + String.fromCharCode(...units)
}
