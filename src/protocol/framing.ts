/**
 * Frames of the game protocol split out of a TCP stream, with or without compression, for the packet relays.
 *
 * Without compression: `VarInt length | VarInt packetId | body`.
 * After Set Compression: `VarInt packetLength | VarInt dataLength | data`, where dataLength 0 means the data is the
 * packet itself (`packetId | body`) and any other value is the size of the packet once the zlib data is inflated.
 *
 * Chunks arrive split anywhere. A frame that lies inside one chunk is handed out as a view of that chunk (no copy);
 * one that spans chunks is copied once into a buffer of its own. A frame's packet id is read without inflating when
 * its data is not compressed; for compressed frames `peekPacket` inflates only a bounded prefix and `readPacket`
 * inflates all of it.
 */
import { constants, deflateSync, inflateSync } from "node:zlib"
import { type Invalid, invalid } from "./result.js"
import { readVarInt, varIntSize, writeVarIntInto } from "./varint.js"

/** The largest packet length: what a 3-byte VarInt holds, and what vanilla's frame decoder accepts. */
export const MAX_PACKET_LENGTH = 2_097_151
/** The largest inflated size a compressed frame may claim (vanilla's and Velocity's cap). */
export const MAX_UNCOMPRESSED_LENGTH = 8_388_608
/** Length prefixes longer than this cannot encode a length up to MAX_PACKET_LENGTH. */
const MAX_LENGTH_PREFIX_BYTES = 3

export interface Frame {
  readonly _tag: "Frame"
  /**
   * Holds the frame: the chunk it arrived in (a view: valid as long as the caller keeps that chunk unchanged) or,
   * when it spanned chunks, a buffer made for it. `buffer.subarray(start, end)` is the frame exactly as received.
   */
  readonly buffer: Buffer
  readonly start: number
  readonly end: number
  /** Where the packet data starts: after the length prefix, and after the dataLength VarInt under compression. */
  readonly dataStart: number
  /** The inflated size of compressed data; 0 when the data is not compressed (compression off, or dataLength 0). */
  readonly uncompressedLength: number
  /** The packet id, or -1 when the data is compressed (see `peekPacket` and `readPacket`). */
  readonly packetId: number
  /** Where the body (after the packet id) starts, or -1 when the data is compressed. */
  readonly bodyStart: number
}

export type FrameRead = Frame | { readonly _tag: "Incomplete" } | Invalid

const INCOMPLETE: FrameRead = { _tag: "Incomplete" }

/** Something that turns ciphertext into plaintext, chunk by chunk (see cipher.ts). */
export interface ChunkTransform {
  readonly update: (chunk: Buffer) => Buffer
}

/**
 * Splits one direction of a connection into frames: `push` chunks as they arrive, then call `next` until it says
 * `Incomplete`. Pull one frame at a time: Set Compression changes how the very next frame is read, so the caller
 * calls `setCompression` after reading it and before the next `next`. After an `Invalid` every `next` repeats it.
 *
 * A frame that spans chunks is copied once: when its length is known, a buffer of its size is made (not zeroed, so
 * its pages are only committed as bytes arrive) and later chunks are copied into it as they come. A peer trickling
 * a large frame a byte at a time therefore holds no more than the frame; lower `maxPacketLength` where large frames
 * have no business (a client in login) so that even that stays small.
 */
export class FrameDecoder {
  /** Received chunks not yet read, from `chunks[head]` at `offset`. */
  private chunks: Array<Buffer> = []
  private head = 0
  private offset = 0
  /** Bytes in `chunks` not yet read. */
  private queued = 0
  /** A frame that spans chunks, being filled as they arrive. */
  private assembly: Buffer | undefined
  private assemblyFilled = 0
  private assemblyPrefix = 0
  private threshold = -1
  private failure: Invalid | undefined
  private decrypt: ChunkTransform | undefined

  /**
   * `belowThreshold`: what a compressed frame claiming fewer bytes than the threshold is. A vanilla server refuses
   * it from a client; a vanilla client takes it from a server, so Portal takes it from a backend too ("accept").
   */
  constructor(
    private maxPacketLength = MAX_PACKET_LENGTH,
    private readonly belowThreshold: "refuse" | "accept" = "refuse"
  ) {}

  /** Frames longer than this are Invalid from the next frame on (at most MAX_PACKET_LENGTH). */
  setMaxPacketLength(maxPacketLength: number): void {
    this.maxPacketLength = Math.min(maxPacketLength, MAX_PACKET_LENGTH)
  }

  /** The threshold in force: -1 while compression is off. */
  get compressionThreshold(): number {
    return this.threshold
  }

  /** Bytes received and not yet handed out as frames (for backpressure). */
  get bufferedBytes(): number {
    return this.queued + this.assemblyFilled
  }

  /** From the next frame on, frames carry the compressed format; a negative threshold turns it off again. */
  setCompression(threshold: number): void {
    this.threshold = threshold < 0 ? -1 : threshold
  }

  /** From the next byte on, the stream is encrypted: what is buffered and every later chunk is decrypted first. */
  setDecryption(decrypt: ChunkTransform): void {
    const buffered = this.bufferedBytes > 0 ? this.takeBuffered() : undefined
    this.decrypt = decrypt
    if (buffered !== undefined) this.push(buffered)
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return
    let plain = this.decrypt === undefined ? chunk : this.decrypt.update(chunk)
    if (this.assembly !== undefined && this.assemblyFilled < this.assembly.length) {
      const take = Math.min(plain.length, this.assembly.length - this.assemblyFilled)
      plain.copy(this.assembly, this.assemblyFilled, 0, take)
      this.assemblyFilled += take
      if (take === plain.length) return
      plain = plain.subarray(take)
    }
    this.chunks.push(plain)
    this.queued += plain.length
  }

  /**
   * Copies the received bytes not yet read as frames into memory of the decoder's own: the chunks they arrived in
   * are about to be reused (a read buffer shared between connections). A frame being assembled is its own already.
   */
  ownBuffered(): void {
    if (this.queued === 0) return
    const rest = Buffer.allocUnsafe(this.queued)
    let filled = 0
    for (let i = this.head; i < this.chunks.length; i++) {
      const chunk = this.chunks[i]!
      filled += chunk.copy(rest, filled, i === this.head ? this.offset : 0)
    }
    this.chunks = [rest]
    this.head = 0
    this.offset = 0
  }

  /** Hands over everything buffered and not yet read as frames (for a switch to a raw relay); the decoder is emptied. */
  takeBuffered(): Buffer {
    const parts: Array<Buffer> = []
    if (this.assembly !== undefined) parts.push(this.assembly.subarray(0, this.assemblyFilled))
    for (let i = this.head; i < this.chunks.length; i++) parts.push(i === this.head ? this.chunks[i]!.subarray(this.offset) : this.chunks[i]!)
    this.chunks = []
    this.head = 0
    this.offset = 0
    this.queued = 0
    this.assembly = undefined
    this.assemblyFilled = 0
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts)
  }

  next(): FrameRead {
    if (this.failure !== undefined) return this.failure
    if (this.assembly !== undefined) {
      if (this.assemblyFilled < this.assembly.length) return INCOMPLETE
      const buffer = this.assembly
      this.assembly = undefined
      this.assemblyFilled = 0
      return this.parsed(buffer, 0, buffer.length, this.assemblyPrefix)
    }
    if (this.queued === 0) return INCOMPLETE
    // The length prefix, which may itself be split between chunks.
    let length = 0
    let prefixSize = 0
    let index = this.head
    let position = this.offset
    for (;;) {
      if (prefixSize === this.queued) return INCOMPLETE
      let chunk = this.chunks[index]!
      while (position >= chunk.length) {
        chunk = this.chunks[++index]!
        position = 0
      }
      const byte = chunk[position++]!
      length |= (byte & 0x7f) << (7 * prefixSize)
      prefixSize++
      if ((byte & 0x80) === 0) break
      if (prefixSize === MAX_LENGTH_PREFIX_BYTES) return this.fail(`frame length wider than 21 bits`)
    }
    if (length === 0) return this.fail("empty frame")
    if (length > this.maxPacketLength) return this.fail(`frame of ${length} bytes exceeds ${this.maxPacketLength}`)
    const total = prefixSize + length

    const first = this.chunks[this.head]!
    if (first.length - this.offset >= total) {
      // The common case: the whole frame inside one chunk, handed out as a view.
      const start = this.offset
      this.offset += total
      this.queued -= total
      if (this.offset === first.length) this.dropHead()
      return this.parsed(first, start, start + total, prefixSize)
    }
    // Spans chunks: copy what has arrived into a buffer of its own; `push` fills the rest.
    const buffer = Buffer.allocUnsafe(total)
    let filled = 0
    while (filled < total && this.queued > 0) {
      const chunk = this.chunks[this.head]!
      const take = Math.min(chunk.length - this.offset, total - filled)
      chunk.copy(buffer, filled, this.offset, this.offset + take)
      filled += take
      this.offset += take
      this.queued -= take
      if (this.offset === chunk.length) this.dropHead()
    }
    if (filled === total) return this.parsed(buffer, 0, total, prefixSize)
    this.assembly = buffer
    this.assemblyFilled = filled
    this.assemblyPrefix = prefixSize
    return INCOMPLETE
  }

  private dropHead(): void {
    this.head++
    this.offset = 0
    if (this.head === this.chunks.length) {
      // Emptied by popping: `length = 0` gives up the array's storage, and the next push, once per read in each
      // direction, would allocate it again.
      while (this.chunks.length > 0) this.chunks.pop()
      this.head = 0
    } else if (this.head >= 64) {
      this.chunks = this.chunks.slice(this.head)
      this.head = 0
    }
  }

  private parsed(buffer: Buffer, start: number, end: number, prefixSize: number): FrameRead {
    const frame = parseFrame(buffer, start, end, start + prefixSize, this.threshold, this.belowThreshold === "accept")
    if (frame._tag === "Invalid") this.failure = frame
    return frame
  }

  private fail(reason: string): Invalid {
    this.failure = invalid(reason)
    return this.failure
  }
}

/** Reads what follows the length prefix: the dataLength under compression, then the packet id if not compressed. */
const parseFrame = (buffer: Buffer, start: number, end: number, contentStart: number, threshold: number, belowThresholdOk: boolean): Frame | Invalid => {
  // Nearly every relayed frame has a one-byte dataLength (0) and packet id: read without a result object per VarInt,
  // two of the few objects the relay makes per frame at a game's packet rate.
  if (contentStart + 1 < end) {
    const first = buffer[contentStart]!
    if (threshold < 0 && first < 0x80) return { _tag: "Frame", buffer, start, end, dataStart: contentStart, uncompressedLength: 0, packetId: first, bodyStart: contentStart + 1 }
    const second = buffer[contentStart + 1]!
    if (threshold >= 0 && first === 0 && second < 0x80) {
      return { _tag: "Frame", buffer, start, end, dataStart: contentStart + 1, uncompressedLength: 0, packetId: second, bodyStart: contentStart + 2 }
    }
  }
  let dataStart = contentStart
  if (threshold >= 0) {
    const dataLength = readVarInt(buffer, contentStart, end)
    if (dataLength._tag === "Incomplete") return invalid("frame too short for its data length")
    if (dataLength._tag === "Invalid") return invalid(`data length: ${dataLength.reason}`)
    dataStart = contentStart + dataLength.size
    const claimed = dataLength.value
    if (claimed !== 0) {
      if (claimed < 0) return invalid(`negative data length ${claimed}`)
      if (claimed < threshold && !belowThresholdOk) return invalid(`compressed frame claims ${claimed} bytes, below the threshold of ${threshold}`)
      if (claimed > MAX_UNCOMPRESSED_LENGTH) return invalid(`compressed frame claims ${claimed} bytes, over ${MAX_UNCOMPRESSED_LENGTH}`)
      if (dataStart === end) return invalid("compressed frame without data")
      return { _tag: "Frame", buffer, start, end, dataStart, uncompressedLength: claimed, packetId: -1, bodyStart: -1 }
    }
  }
  const id = readVarInt(buffer, dataStart, end)
  if (id._tag === "Incomplete") return invalid("frame too short for a packet id")
  if (id._tag === "Invalid") return invalid(`packet id: ${id.reason}`)
  return { _tag: "Frame", buffer, start, end, dataStart, uncompressedLength: 0, packetId: id.value, bodyStart: dataStart + id.size }
}

/** Reads one frame held whole in `bytes` (a test or a one-off read); Incomplete if it is cut short. */
export const readOneFrame = (bytes: Buffer, threshold: number, maxPacketLength = MAX_PACKET_LENGTH): FrameRead => {
  const decoder = new FrameDecoder(maxPacketLength)
  decoder.setCompression(threshold)
  decoder.push(bytes)
  return decoder.next()
}

export type PacketRead =
  | {
      readonly _tag: "Packet"
      readonly packetId: number
      /** The body after the id: a view of the frame when it was not compressed, else of the inflated data. */
      readonly body: Buffer
    }
  | Invalid

const bodyView = (frame: Frame): PacketRead => ({ _tag: "Packet", packetId: frame.packetId, body: frame.buffer.subarray(frame.bodyStart, frame.end) })

const zlibFailure = (frame: Frame, error: unknown): Invalid => {
  const code = (error as { code?: unknown } | null)?.code
  if (code === "ERR_BUFFER_TOO_LARGE") return invalid(`compressed frame inflates to more than the ${frame.uncompressedLength} bytes it claims`)
  return invalid(`compressed frame is not valid zlib data: ${error instanceof Error ? error.message : String(error)}`)
}

/** The packet id and its whole body, inflating compressed data (checked against the size the frame claims). */
export const readPacket = (frame: Frame): PacketRead => {
  if (frame.packetId >= 0) return bodyView(frame)
  let data: Buffer
  try {
    data = inflateSync(frame.buffer.subarray(frame.dataStart, frame.end), { maxOutputLength: frame.uncompressedLength })
  } catch (error) {
    return zlibFailure(frame, error)
  }
  if (data.length !== frame.uncompressedLength) {
    return invalid(`compressed frame inflates to ${data.length} bytes, not the ${frame.uncompressedLength} it claims`)
  }
  const id = readVarInt(data)
  if (id._tag !== "Value") return invalid(`packet id: ${id._tag === "Invalid" ? id.reason : "truncated"}`)
  return { _tag: "Packet", packetId: id.value, body: data.subarray(id.size) }
}

export type PacketPeek =
  | {
      readonly _tag: "Peek"
      readonly packetId: number
      /** The first bytes of the body: `bodyBytes` of them, or fewer when the body is shorter. */
      readonly head: Buffer
    }
  | Invalid

/** Compressed bytes fed to the first attempt of a peek, then eight times more at each further attempt. */
const PEEK_FIRST_INPUT = 128
/** zlib's output chunk for a peek: small, since a peek wants a few bytes (Node's default is 16 KiB). */
const PEEK_CHUNK = 1024

/**
 * The packet id and the first `bodyBytes` of the body, without inflating more than needed: the first 128
 * compressed bytes are inflated with a sync flush (so a cut stream is no error), then 8 times more while that did
 * not yield enough, up to the whole frame.
 *
 * Measured (Node 20, x64, a shared 2-core VM, so +-30%), peeking 32 body bytes: 2.3-3.2 µs for packets of 300 B
 * to 100 kB (one attempt), 4.6 µs when the first 128 bytes do not suffice (two attempts), against a full inflate
 * of 3.6 µs at 300 B, 7 µs at 2 kB and 58 µs at 100 kB. Most of the 2-3 µs is the zlib handle Node makes per call,
 * so a hand-written partial inflater in JS would buy little (Node has no public synchronous API on a reusable
 * handle). Splitting itself costs about 16 ns per frame (a 64 KiB chunk of 660 small frames in 10-12 µs).
 * Damaged zlib data after the inflated prefix goes unnoticed here; `readPacket` checks all of it.
 */
export const peekPacket = (frame: Frame, bodyBytes: number): PacketPeek => {
  if (frame.packetId >= 0) {
    return { _tag: "Peek", packetId: frame.packetId, head: frame.buffer.subarray(frame.bodyStart, Math.min(frame.end, frame.bodyStart + bodyBytes)) }
  }
  const compressed = frame.buffer.subarray(frame.dataStart, frame.end)
  const wanted = Math.min(frame.uncompressedLength, 5 + bodyBytes)
  for (let take = PEEK_FIRST_INPUT; ; take *= 8) {
    const whole = take >= compressed.length
    let data: Buffer
    try {
      data = whole
        ? inflateSync(compressed, { maxOutputLength: frame.uncompressedLength })
        : inflateSync(compressed.subarray(0, take), {
            finishFlush: constants.Z_SYNC_FLUSH,
            chunkSize: PEEK_CHUNK,
            maxOutputLength: frame.uncompressedLength
          })
    } catch (error) {
      return zlibFailure(frame, error)
    }
    if (whole && data.length !== frame.uncompressedLength) {
      return invalid(`compressed frame inflates to ${data.length} bytes, not the ${frame.uncompressedLength} it claims`)
    }
    if (data.length >= wanted || whole) {
      const id = readVarInt(data)
      if (id._tag !== "Value") return invalid(`packet id: ${id._tag === "Invalid" ? id.reason : "truncated"}`)
      return { _tag: "Peek", packetId: id.value, head: data.subarray(id.size, Math.min(data.length, id.size + bodyBytes)) }
    }
  }
}

/** The body of a frame whose data is not compressed (a view); undefined for a compressed one. */
export const frameBody = (frame: Frame): Buffer | undefined =>
  frame.bodyStart < 0 ? undefined : frame.buffer.subarray(frame.bodyStart, frame.end)

export interface EncodeOptions {
  /** zlib level for compressed frames; zlib's default (6, as vanilla) when absent. */
  readonly level?: number
}

/**
 * One frame holding `packetId | body`, in the format of a connection whose compression threshold is `threshold`
 * (-1: off). The packet is compressed when it is at least `threshold` bytes long, as vanilla does.
 */
export const encodeFrame = (packetId: number, body: Buffer, threshold: number, options?: EncodeOptions): Buffer => {
  const idSize = varIntSize(packetId)
  const packetLength = idSize + body.length
  if (threshold < 0 || packetLength < threshold) {
    const contentLength = packetLength + (threshold < 0 ? 0 : 1)
    const out = Buffer.allocUnsafe(varIntSize(contentLength) + contentLength)
    let at = writeVarIntInto(out, contentLength, 0)
    if (threshold >= 0) out[at++] = 0
    at = writeVarIntInto(out, packetId, at)
    body.copy(out, at)
    return out
  }
  const packet = Buffer.allocUnsafe(packetLength)
  body.copy(packet, writeVarIntInto(packet, packetId, 0))
  return compressedFrame(packet, options)
}

const compressedFrame = (packet: Buffer, options: EncodeOptions | undefined): Buffer => {
  const compressed = deflateSync(packet, options?.level === undefined ? undefined : { level: options.level })
  const contentLength = varIntSize(packet.length) + compressed.length
  const out = Buffer.allocUnsafe(varIntSize(contentLength) + contentLength)
  const at = writeVarIntInto(out, packet.length, writeVarIntInto(out, contentLength, 0))
  compressed.copy(out, at)
  return out
}

/**
 * A frame read on one connection, written for another whose threshold is `threshold`: the bytes as they are when
 * both use the same format, else the packet re-framed (inflated and/or compressed as needed).
 */
export const reencodeFrame = (frame: Frame, sourceThreshold: number, threshold: number, options?: EncodeOptions): Buffer | Invalid => {
  if (sourceThreshold === threshold) return frame.buffer.subarray(frame.start, frame.end)
  const packet = readPacket(frame)
  if (packet._tag === "Invalid") return packet
  return encodeFrame(packet.packetId, packet.body, threshold, options)
}
