/**
 * A small protobuf writer for the OTLP trace request (otlpTraces.ts): varints, fixed64 nanoseconds from milliseconds,
 * strings and bytes into one growing Buffer, and length-delimited messages whose length is written once their body
 * is (a reserved prefix, closed up after). No allocation per field.
 */

/** Wire types. */
export const VARINT = 0
export const FIXED64 = 1
export const LENGTH_DELIMITED = 2

/** Bytes a length prefix reserves: enough for any message under 2^35 bytes. */
const RESERVED = 5

export const varintSize = (value: number): number => {
  let size = 1
  while (value >= 0x80) {
    value = Math.floor(value / 128)
    size++
  }
  return size
}

export class ProtoWriter {
  buffer: Buffer
  position = 0

  constructor(initial = 64 * 1024) {
    this.buffer = Buffer.allocUnsafe(initial)
  }

  /** Room for `bytes` more. */
  ensure(bytes: number): void {
    if (this.position + bytes <= this.buffer.length) return
    const next = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.position + bytes))
    this.buffer.copy(next, 0, 0, this.position)
    this.buffer = next
  }

  /**
   * Starts over in a fresh buffer of `size` bytes, or in `reuse` when given (what `finish` returned before stays as
   * it was, unless it was a view of `reuse`).
   */
  reset(size = this.buffer.length, reuse?: Buffer): void {
    this.buffer = reuse ?? Buffer.allocUnsafe(size)
    this.position = 0
  }

  /** The bytes written so far (a view of the writer's buffer: `reset` before writing anything else). */
  finish(): Uint8Array {
    return this.buffer.subarray(0, this.position)
  }

  /** A non-negative integer below 2^53. */
  varint(value: number): void {
    this.ensure(10)
    this.position = writeVarint(this.buffer, this.position, value)
  }

  tag(field: number, wireType: number): void {
    this.varint(field * 8 + wireType)
  }

  /**
   * Nanoseconds since the epoch from epoch milliseconds (fractional), as a little-endian fixed64: the seconds and the
   * nanoseconds within them are exact in doubles, their 64-bit product is assembled from 32-bit halves.
   */
  fixed64Nanos(epochMillis: number): void {
    this.ensure(8)
    const seconds = Math.floor(epochMillis / 1000)
    const nanos = Math.min(999_999_999, Math.max(0, Math.round((epochMillis - seconds * 1000) * 1e6)))
    // seconds * 1e9 + nanos = a * 2^16 + b, with a and b below 2^47 (exact); then a * 2^16 split at 2^32.
    const a = Math.floor(seconds / 65536) * 1e9
    const b = (seconds % 65536) * 1e9 + nanos
    const c = (a % 65536) * 65536 + b
    const low = c % 4294967296
    const high = Math.floor(a / 65536) + Math.floor(c / 4294967296)
    const buffer = this.buffer
    const at = this.position
    buffer[at] = low & 0xff
    buffer[at + 1] = (low >>> 8) & 0xff
    buffer[at + 2] = (low >>> 16) & 0xff
    buffer[at + 3] = low >>> 24
    buffer[at + 4] = high & 0xff
    buffer[at + 5] = (high >>> 8) & 0xff
    buffer[at + 6] = (high >>> 16) & 0xff
    buffer[at + 7] = high >>> 24
    this.position = at + 8
  }

  double(value: number): void {
    this.ensure(8)
    this.buffer.writeDoubleLE(value, this.position)
    this.position += 8
  }

  /** A length-delimited string field. */
  stringField(field: number, value: string): void {
    this.tag(field, LENGTH_DELIMITED)
    this.string(value)
  }

  /**
   * A KeyValue field (`field`) with a string value, written in one pass where every length is one byte (a short
   * ASCII value, as nearly all are): `key` is the key's field, encoded beforehand. False when it is not such a
   * value (nothing is written then).
   */
  shortStringKeyValue(field: number, key: Uint8Array, value: string): boolean {
    const length = value.length
    const keyLength = key.length
    // tag, kv length, key, AnyValue tag, AnyValue length, string tag, string length, string
    const kv = keyLength + 4 + length
    if (kv >= 0x80 || field >= 16) return false
    this.ensure(kv + 2)
    const buffer = this.buffer
    const start = this.position
    let at = start + 2 + keyLength + 4
    for (let index = 0; index < length; index++) {
      const code = value.charCodeAt(index)
      if (code >= 0x80) return false
      buffer[at++] = code
    }
    buffer[start] = (field << 3) | LENGTH_DELIMITED
    buffer[start + 1] = kv
    for (let index = 0; index < keyLength; index++) buffer[start + 2 + index] = key[index]!
    at = start + 2 + keyLength
    buffer[at] = (2 << 3) | LENGTH_DELIMITED
    buffer[at + 1] = length + 2
    buffer[at + 2] = (1 << 3) | LENGTH_DELIMITED
    buffer[at + 3] = length
    this.position = start + 2 + kv
    return true
  }

  /** Bytes encoded beforehand (a constant field), as they are. */
  raw(bytes: Uint8Array): void {
    this.copy(bytes, 0, bytes.length)
  }

  /** `source[start, end)` as it is; short runs by hand (a call into the native copy costs more than they do). */
  private copy(source: Uint8Array, start: number, end: number): void {
    const length = end - start
    this.ensure(length)
    if (length > 64) this.buffer.set(source.subarray(start, end), this.position)
    else {
      const buffer = this.buffer
      const at = this.position - start
      for (let index = start; index < end; index++) buffer[at + index] = source[index]!
    }
    this.position += length
  }

  /** A string's length and UTF-8 bytes. */
  string(value: string): void {
    // Most strings here are short and ASCII: copied by hand after a one-byte length.
    const length = value.length
    if (length < 0x80) {
      this.ensure(length + 1)
      const buffer = this.buffer
      const start = this.position + 1
      let index = 0
      for (; index < length; index++) {
        const code = value.charCodeAt(index)
        if (code >= 0x80) break
        buffer[start + index] = code
      }
      if (index === length) {
        buffer[this.position] = length
        this.position = start + length
        return
      }
    }
    // Otherwise written after a one-byte length, and moved on the rare longer one.
    const most = length * 3
    // With room for the longest length prefix too: the varint below must not grow (and so move) the buffer.
    this.ensure(most + 16)
    const start = this.position + 1
    const written = this.buffer.write(value, start, "utf8")
    if (written < 0x80) {
      this.buffer[this.position] = written
      this.position = start + written
      return
    }
    const size = varintSize(written)
    this.buffer.copyWithin(this.position + size, start, start + written)
    this.position = writeVarint(this.buffer, this.position, written) + written
  }

  /** A bytes field from `source[start, end)`. */
  bytesField(field: number, source: Uint8Array, start: number, end: number): void {
    this.tag(field, LENGTH_DELIMITED)
    this.varint(end - start)
    this.copy(source, start, end)
  }

  /** Opens a length-delimited field; `close` with what this returns once its body is written. */
  open(field: number): number {
    this.tag(field, LENGTH_DELIMITED)
    this.ensure(RESERVED)
    const start = this.position
    this.position += RESERVED
    return start
  }

  close(start: number): void {
    const bodyStart = start + RESERVED
    const length = this.position - bodyStart
    const size = varintSize(length)
    if (size < RESERVED) this.buffer.copyWithin(start + size, bodyStart, this.position)
    writeVarint(this.buffer, start, length)
    this.position = start + size + length
  }
}

/** Writes `value` as a varint at `position` (room is the caller's concern); the position after it. */
const writeVarint = (buffer: Buffer, position: number, value: number): number => {
  while (value >= 0x80) {
    buffer[position++] = (value % 128) | 0x80
    value = Math.floor(value / 128)
  }
  buffer[position++] = value
  return position
}
