/**
 * Network NBT (1.20.2+): a root tag written as its type byte and payload, with no name. Used for text components
 * from 1.20.3 (protocol 765). The encoder covers what text compounds need, from JSON-like values: strings, booleans
 * (TAG_Byte), numbers (TAG_Int when a 32-bit integer, else TAG_Double), bigints (TAG_Long), lists and compounds.
 * The decoder reads every tag type, bounded, into plain values (for logging a backend's disconnect reason).
 */
import { clampModifiedUtf8, decodeModifiedUtf8, modifiedUtf8Length, writeModifiedUtf8 } from "./modifiedUtf8.js"
import { type Invalid, invalid } from "./result.js"

export const TAG_END = 0
export const TAG_BYTE = 1
export const TAG_SHORT = 2
export const TAG_INT = 3
export const TAG_LONG = 4
export const TAG_FLOAT = 5
export const TAG_DOUBLE = 6
export const TAG_BYTE_ARRAY = 7
export const TAG_STRING = 8
export const TAG_LIST = 9
export const TAG_COMPOUND = 10
export const TAG_INT_ARRAY = 11
export const TAG_LONG_ARRAY = 12

/** Vanilla's nesting limit for NBT read from the network. */
const MAX_DEPTH = 512

export type NbtInput = string | number | boolean | bigint | ReadonlyArray<NbtInput> | { readonly [key: string]: NbtInput | null | undefined }

const tagOf = (value: NbtInput): number => {
  switch (typeof value) {
    case "string":
      return TAG_STRING
    case "boolean":
      return TAG_BYTE
    case "bigint":
      return TAG_LONG
    case "number":
      return Number.isInteger(value) && value >= -0x80000000 && value <= 0x7fffffff ? TAG_INT : TAG_DOUBLE
    default:
      return Array.isArray(value) ? TAG_LIST : TAG_COMPOUND
  }
}

class Writer {
  private buffer = Buffer.allocUnsafe(256)
  length = 0

  private room(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes))
    this.buffer.copy(grown, 0, 0, this.length)
    this.buffer = grown
  }

  u8(value: number): void {
    this.room(1)
    this.buffer[this.length++] = value
  }

  i32(value: number): void {
    this.room(4)
    this.buffer.writeInt32BE(value, this.length)
    this.length += 4
  }

  i64(value: bigint): void {
    this.room(8)
    this.buffer.writeBigInt64BE(BigInt.asIntN(64, value), this.length)
    this.length += 8
  }

  f64(value: number): void {
    this.room(8)
    this.buffer.writeDoubleBE(value, this.length)
    this.length += 8
  }

  /** u16 length + modified UTF-8; a string over 65535 bytes is cut (a message that long is never sensible). */
  string(text: string): void {
    const clamped = clampModifiedUtf8(text)
    const length = modifiedUtf8Length(clamped)
    this.room(2 + length)
    this.buffer.writeUInt16BE(length, this.length)
    this.length = writeModifiedUtf8(clamped, this.buffer, this.length + 2)
  }

  result(): Buffer {
    return this.buffer.subarray(0, this.length)
  }
}

const isWrapper = (value: NbtInput): boolean =>
  tagOf(value) === TAG_COMPOUND && Object.keys(value as object).length === 1 && Object.hasOwn(value as object, "")

const writePayload = (writer: Writer, value: NbtInput, tag: number): void => {
  switch (tag) {
    case TAG_STRING:
      return writer.string(value as string)
    case TAG_BYTE:
      return writer.u8(value === true ? 1 : 0)
    case TAG_INT:
      return writer.i32(value as number)
    case TAG_DOUBLE:
      return writer.f64(value as number)
    case TAG_LONG:
      return writer.i64(value as bigint)
    case TAG_LIST: {
      const items = value as ReadonlyArray<NbtInput>
      const tags = items.map(tagOf)
      const same = tags.every((t) => t === tags[0])
      if (items.length === 0) {
        writer.u8(TAG_END)
        writer.i32(0)
      } else if (same) {
        writer.u8(tags[0]!)
        writer.i32(items.length)
        items.forEach((item, i) => writePayload(writer, item, tags[i]!))
      } else {
        // Mixed lists: vanilla (1.20.3+) wraps each element that is not already a plain compound as {"": element}.
        writer.u8(TAG_COMPOUND)
        writer.i32(items.length)
        for (const item of items) {
          writePayload(writer, tagOf(item) === TAG_COMPOUND && !isWrapper(item) ? item : { "": item }, TAG_COMPOUND)
        }
      }
      return
    }
    default: {
      for (const [key, field] of Object.entries(value as Record<string, NbtInput | null | undefined>)) {
        if (field === null || field === undefined) continue
        const fieldTag = tagOf(field)
        writer.u8(fieldTag)
        writer.string(key)
        writePayload(writer, field, fieldTag)
      }
      writer.u8(TAG_END)
    }
  }
}

/** The network form of a value: type byte, then payload (no root name). */
export const encodeNetworkNbt = (value: NbtInput): Buffer => {
  const writer = new Writer()
  const tag = tagOf(value)
  writer.u8(tag)
  writePayload(writer, value, tag)
  return writer.result()
}

export type NbtRead = { readonly _tag: "Nbt"; readonly value: unknown; readonly size: number } | Invalid

class Truncated {}

/**
 * Reads network NBT at `offset`: bytes and shorts and ints become numbers, longs bigints, arrays number arrays
 * (longs: bigint arrays), compounds plain objects; lists of {"": x} wrappers are unwrapped as vanilla does.
 */
export const decodeNetworkNbt = (bytes: Buffer, offset = 0): NbtRead => {
  let at = offset
  const need = (count: number) => {
    if (count < 0 || at + count > bytes.length) throw new Truncated()
  }
  const readString = (): string => {
    need(2)
    const length = bytes.readUInt16BE(at)
    at += 2
    need(length)
    const text = decodeModifiedUtf8(bytes, at, length)
    if (typeof text !== "string") throw new BadNbt(text.reason)
    at += length
    return text
  }
  const readPayload = (tag: number, depth: number): unknown => {
    if (depth > MAX_DEPTH) throw new BadNbt(`NBT nested deeper than ${MAX_DEPTH}`)
    switch (tag) {
      case TAG_BYTE:
        need(1)
        return bytes.readInt8(at++)
      case TAG_SHORT:
        need(2)
        at += 2
        return bytes.readInt16BE(at - 2)
      case TAG_INT:
        need(4)
        at += 4
        return bytes.readInt32BE(at - 4)
      case TAG_LONG:
        need(8)
        at += 8
        return bytes.readBigInt64BE(at - 8)
      case TAG_FLOAT:
        need(4)
        at += 4
        return bytes.readFloatBE(at - 4)
      case TAG_DOUBLE:
        need(8)
        at += 8
        return bytes.readDoubleBE(at - 8)
      case TAG_BYTE_ARRAY:
      case TAG_INT_ARRAY:
      case TAG_LONG_ARRAY: {
        need(4)
        const count = bytes.readInt32BE(at)
        at += 4
        const width = tag === TAG_BYTE_ARRAY ? 1 : tag === TAG_INT_ARRAY ? 4 : 8
        if (count < 0) throw new BadNbt(`negative array length ${count}`)
        need(count * width)
        const out: Array<number | bigint> = []
        for (let i = 0; i < count; i++) {
          out.push(width === 1 ? bytes.readInt8(at) : width === 4 ? bytes.readInt32BE(at) : bytes.readBigInt64BE(at))
          at += width
        }
        return out
      }
      case TAG_STRING:
        return readString()
      case TAG_LIST: {
        need(5)
        const itemTag = bytes[at]!
        const count = bytes.readInt32BE(at + 1)
        at += 5
        if (count < 0) throw new BadNbt(`negative list length ${count}`)
        if (count > 0 && itemTag === TAG_END) throw new BadNbt("list of TAG_End with elements")
        // Every element takes at least one byte, except empty compounds' lone end byte: still one byte.
        need(count > 0 && itemTag !== TAG_END ? count : 0)
        const out: Array<unknown> = []
        for (let i = 0; i < count; i++) {
          const item = readPayload(itemTag, depth + 1)
          out.push(itemTag === TAG_COMPOUND && isDecodedWrapper(item) ? (item as Record<string, unknown>)[""] : item)
        }
        return out
      }
      case TAG_COMPOUND: {
        const out: Record<string, unknown> = {}
        for (;;) {
          need(1)
          const fieldTag = bytes[at++]!
          if (fieldTag === TAG_END) return out
          const key = readString()
          Object.defineProperty(out, key, { value: readPayload(fieldTag, depth + 1), enumerable: true, writable: true, configurable: true })
        }
      }
      default:
        throw new BadNbt(`unknown NBT tag ${tag}`)
    }
  }
  try {
    need(1)
    const tag = bytes[at++]!
    if (tag === TAG_END) return { _tag: "Nbt", value: null, size: 1 }
    const value = readPayload(tag, 0)
    return { _tag: "Nbt", value, size: at - offset }
  } catch (error) {
    if (error instanceof Truncated) return invalid("truncated NBT")
    if (error instanceof BadNbt) return invalid(error.reason)
    return invalid(`bad NBT: ${error instanceof Error ? error.message : String(error)}`)
  }
}

class BadNbt {
  constructor(readonly reason: string) {}
}

const isDecodedWrapper = (value: unknown): boolean =>
  value !== null && typeof value === "object" && Object.keys(value).length === 1 && Object.hasOwn(value, "")
