/** Framing with and without compression, against minecraft-protocol's splitter, framer, compressor and decompressor. */
import { createHash, randomBytes } from "node:crypto"
import { constants, deflateSync, inflateSync } from "node:zlib"
import { describe, expect, it } from "vitest"
import { createDecryptor, createEncryptor, type StreamCipher } from "../../src/protocol/cipher.js"
import {
  encodeFrame,
  type Frame,
  FrameDecoder,
  frameBody,
  MAX_PACKET_LENGTH,
  peekPacket,
  readOneFrame,
  readPacket,
  reencodeFrame
} from "../../src/protocol/framing.js"
import { encodeVarInt } from "../../src/protocol/varint.js"
import { compression, framing, runTransform, seeded, splitRandomly } from "./mcPeer.js"

const hex = (text: string) => Buffer.from(text.replace(/\s+/g, ""), "hex")

/** Bodies of varied sizes and contents, around the usual threshold and far above it. */
const samplePackets = (random: (below: number) => number, count: number) =>
  Array.from({ length: count }, (_, i) => {
    const size = [0, 1, 10, 200, 254, 255, 256, 257, 1000, 5000, 70_000][random(11)]!
    const body = Buffer.alloc(size)
    for (let j = 0; j < size; j++) body[j] = random(4) === 0 ? random(256) : (j * 7 + i) & 0xff
    return { id: random(0x80) + (i % 3 === 0 ? 0x80 : 0), body }
  })

const drain = (decoder: FrameDecoder): Array<Frame> => {
  const frames: Array<Frame> = []
  for (;;) {
    const read = decoder.next()
    if (read._tag === "Incomplete") return frames
    if (read._tag === "Invalid") throw new Error(read.reason)
    frames.push(read)
  }
}

const packetOf = (frame: Frame) => {
  const packet = readPacket(frame)
  if (packet._tag === "Invalid") throw new Error(packet.reason)
  return { id: packet.packetId, body: Buffer.from(packet.body) }
}

/** Packets as short strings: deep equality of large Buffers is slow in the test runner. */
const summary = (packets: ReadonlyArray<{ id: number; body: Buffer }>) =>
  packets.map((p) => `${p.id}:${p.body.length}:${createHash("sha1").update(p.body).digest("hex")}`)

const asInvalid = (read: { _tag: string }) => (read as { reason?: string }).reason

describe("FrameDecoder", () => {
  for (const threshold of [-1, 0, 256]) {
    it(`splits frames cut anywhere (threshold ${threshold})`, () => {
      const random = seeded(1000 + threshold)
      const packets = samplePackets(random, 120)
      const stream = Buffer.concat(packets.map((p) => encodeFrame(p.id, p.body, threshold)))
      for (const maxPiece of [3, 300, 20_000]) {
        const decoder = new FrameDecoder()
        decoder.setCompression(threshold)
        const got: Array<{ id: number; body: Buffer }> = []
        for (const piece of splitRandomly(stream, random, maxPiece)) {
          decoder.push(piece)
          got.push(...drain(decoder).map(packetOf))
        }
        expect(summary(got)).toEqual(summary(packets))
        expect(decoder.bufferedBytes).toBe(0)
      }
    })
  }

  it("hands out frames inside one chunk as views of it, and copies only frames that span chunks", () => {
    const frames = [encodeFrame(1, Buffer.from("first"), -1), encodeFrame(2, Buffer.from("second"), -1), encodeFrame(3, Buffer.alloc(50, 3), -1)]
    const chunk1 = Buffer.concat([frames[0]!, frames[1]!, frames[2]!.subarray(0, 10)])
    const chunk2 = frames[2]!.subarray(10)
    const decoder = new FrameDecoder()
    decoder.push(chunk1)
    const [a, b] = drain(decoder)
    expect(a!.buffer).toBe(chunk1)
    expect(b!.buffer).toBe(chunk1)
    expect(a!.start).toBe(0)
    expect(b!.start).toBe(a!.end)
    expect(chunk1.subarray(b!.start, b!.end)).toEqual(frames[1])
    expect(b!.packetId).toBe(2)
    expect(frameBody(b!)!.toString()).toBe("second")
    decoder.push(chunk2)
    const [c] = drain(decoder)
    expect(c!.buffer).not.toBe(chunk1)
    expect(c!.buffer).not.toBe(chunk2)
    expect(c!.buffer.subarray(c!.start, c!.end)).toEqual(frames[2])
  })

  for (const threshold of [-1, 256]) {
    it(`reading into one reused buffer: what is left of a read is its own once asked (threshold ${threshold})`, () => {
      // Every read lands in the same buffer, overwritten by the next, as the relays' shared read buffer is.
      const random = seeded(2000 + threshold)
      const packets = samplePackets(random, 80)
      const stream = Buffer.concat(packets.map((p) => encodeFrame(p.id, p.body, threshold)))
      const reused = Buffer.alloc(4096)
      const decoder = new FrameDecoder()
      decoder.setCompression(threshold)
      const got: Array<{ id: number; body: Buffer }> = []
      for (const piece of splitRandomly(stream, random, reused.length)) {
        piece.copy(reused)
        decoder.push(reused.subarray(0, piece.length))
        // A packet is read before the next read, as the relay writes or decodes each frame at once.
        got.push(...drain(decoder).map((frame) => ({ ...packetOf(frame), body: Buffer.from(packetOf(frame).body) })))
        decoder.ownBuffered()
        reused.fill(0xee)
      }
      expect(summary(got)).toEqual(summary(packets))
      expect(decoder.bufferedBytes).toBe(0)
    })
  }

  it("reading into one reused buffer: a length prefix cut by the end of a read is kept once asked", () => {
    const first = encodeFrame(0x01, Buffer.from("short"), -1)
    const second = encodeFrame(0x42, Buffer.alloc(300, 9), -1)
    const stream = Buffer.concat([first, second])
    const cut = first.length + 1 // one byte of the second frame's two-byte length prefix
    const reused = Buffer.alloc(stream.length)
    const decoder = new FrameDecoder()
    stream.copy(reused, 0, 0, cut)
    decoder.push(reused.subarray(0, cut))
    expect(drain(decoder).map((frame) => frame.packetId)).toEqual([0x01])
    decoder.ownBuffered()
    reused.fill(0xee)
    stream.copy(reused, 0, cut)
    decoder.push(reused.subarray(0, stream.length - cut))
    const [read] = drain(decoder)
    expect(read!.packetId).toBe(0x42)
    expect(frameBody(read!)).toEqual(Buffer.alloc(300, 9))
  })

  it("keeps only the frame being read when a peer trickles it a byte at a time", () => {
    const frame = encodeFrame(0x10, Buffer.alloc(30_000, 1), -1)
    const decoder = new FrameDecoder()
    const tags = new Set<string>()
    for (let i = 0; i < frame.length - 1; i++) {
      decoder.push(frame.subarray(i, i + 1))
      tags.add(decoder.next()._tag)
    }
    expect([...tags]).toEqual(["Incomplete"])
    decoder.push(frame.subarray(frame.length - 1))
    expect(decoder.bufferedBytes).toBe(frame.length)
    const read = decoder.next() as Frame
    expect(read.buffer.subarray(read.start, read.end)).toEqual(frame)
    expect(decoder.bufferedBytes).toBe(0)
  })

  it("reads a length prefix split across chunks", () => {
    const frame = encodeFrame(0x42, Buffer.alloc(300, 9), -1)
    expect(frame.subarray(0, 2)).toEqual(hex("ad02"))
    const decoder = new FrameDecoder()
    decoder.push(frame.subarray(0, 1))
    expect(decoder.next()._tag).toBe("Incomplete")
    decoder.push(frame.subarray(1, 2))
    expect(decoder.next()._tag).toBe("Incomplete")
    decoder.push(frame.subarray(2))
    const read = decoder.next()
    expect(read._tag === "Frame" && read.packetId).toBe(0x42)
  })

  it("switches to the compressed format between two frames of one chunk", () => {
    const setCompression = encodeFrame(0x03, encodeVarInt(256), -1)
    const big = encodeFrame(0x10, Buffer.alloc(1000, 1), 256)
    const small = encodeFrame(0x11, Buffer.from("hi"), 256)
    const decoder = new FrameDecoder()
    decoder.push(Buffer.concat([setCompression, big, small]))
    const first = decoder.next()
    expect(first._tag === "Frame" && first.packetId).toBe(0x03)
    decoder.setCompression(256)
    const second = decoder.next() as Frame
    expect(second.packetId).toBe(-1)
    expect(second.uncompressedLength).toBe(1001)
    expect(packetOf(second)).toEqual({ id: 0x10, body: Buffer.alloc(1000, 1) })
    const third = decoder.next() as Frame
    expect(third.packetId).toBe(0x11)
    expect(third.uncompressedLength).toBe(0)
    expect(frameBody(third)!.toString()).toBe("hi")
  })

  it("decrypts what is buffered when encryption starts mid-stream, then every later chunk", () => {
    const secret = randomBytes(16)
    const encryptor = createEncryptor(secret) as StreamCipher
    const plainFrame = encodeFrame(0x01, Buffer.from("encryption response"), -1)
    const later = [encodeFrame(0x03, Buffer.from("after"), -1), encodeFrame(0x04, Buffer.alloc(500, 4), -1)]
    const encrypted = encryptor.update(Buffer.concat(later))
    const decoder = new FrameDecoder()
    decoder.push(Buffer.concat([plainFrame, encrypted.subarray(0, 5)]))
    const first = decoder.next() as Frame
    expect(first.packetId).toBe(0x01)
    decoder.setDecryption(createDecryptor(secret) as StreamCipher)
    decoder.push(encrypted.subarray(5, 100))
    decoder.push(encrypted.subarray(100))
    expect(drain(decoder).map(packetOf)).toEqual([
      { id: 0x03, body: Buffer.from("after") },
      { id: 0x04, body: Buffer.alloc(500, 4) }
    ])
  })

  it("hands over what it has not read yet", () => {
    const decoder = new FrameDecoder()
    const frame = encodeFrame(7, Buffer.from("x"), -1)
    decoder.push(Buffer.concat([frame, Buffer.from("raw")]))
    decoder.push(Buffer.from(" bytes"))
    expect((decoder.next() as Frame).packetId).toBe(7)
    expect(decoder.takeBuffered().toString()).toBe("raw bytes")
    expect(decoder.bufferedBytes).toBe(0)
    expect(decoder.next()._tag).toBe("Incomplete")
  })
})

describe("bad frames are Invalid, never thrown, and stay Invalid", () => {
  const cases: Array<{ name: string; bytes: Buffer; threshold: number; reason: RegExp; max?: number }> = [
    { name: "length prefix over 3 bytes", bytes: hex("80808001 00"), threshold: -1, reason: /wider than 21 bits/ },
    { name: "length prefix of 5+ bytes", bytes: hex("ffffffffff0f"), threshold: -1, reason: /wider than 21 bits/ },
    { name: "empty frame", bytes: hex("00"), threshold: -1, reason: /empty frame/ },
    { name: "frame over the decoder's limit", bytes: hex("c801 00"), threshold: -1, reason: /200 bytes exceeds 100/, max: 100 },
    { name: "packet id VarInt over 5 bytes", bytes: hex("06 8080808080 00"), threshold: -1, reason: /packet id: VarInt longer than 5 bytes/ },
    { name: "packet id cut short", bytes: hex("01 80"), threshold: -1, reason: /too short for a packet id/ },
    { name: "data length VarInt over 5 bytes", bytes: hex("06 8080808080 00"), threshold: 256, reason: /data length: VarInt longer/ },
    { name: "data length below the threshold", bytes: Buffer.concat([hex("03"), encodeVarInt(100), hex("789c")]), threshold: 256, reason: /claims 100 bytes, below the threshold of 256/ },
    { name: "data length over 8 MiB", bytes: Buffer.concat([hex("06"), encodeVarInt(8_388_609), hex("789c")]), threshold: 256, reason: /claims 8388609 bytes, over 8388608/ },
    { name: "negative data length", bytes: Buffer.concat([hex("06"), encodeVarInt(-5), hex("00")]), threshold: 0, reason: /negative data length/ },
    { name: "compressed frame with no data", bytes: Buffer.concat([hex("02"), encodeVarInt(300)]), threshold: 256, reason: /without data/ }
  ]
  for (const c of cases) {
    it(c.name, () => {
      const decoder = new FrameDecoder(c.max)
      decoder.setCompression(c.threshold)
      decoder.push(c.bytes)
      const read = decoder.next()
      expect(read._tag).toBe("Invalid")
      expect(asInvalid(read)).toMatch(c.reason)
      decoder.push(encodeFrame(1, Buffer.alloc(0), c.threshold))
      expect(decoder.next()).toBe(read)
    })
  }

  it("a compressed frame claiming less than the threshold: refused from a player, taken from a backend as a vanilla client takes it", () => {
    const packet = Buffer.concat([encodeVarInt(0x6c), Buffer.from("small")])
    const zlib = deflateSync(packet)
    const content = Buffer.concat([encodeVarInt(packet.length), zlib])
    const bytes = Buffer.concat([encodeVarInt(content.length), content])
    const fromPlayer = new FrameDecoder()
    fromPlayer.setCompression(256)
    fromPlayer.push(bytes)
    expect(asInvalid(fromPlayer.next())).toMatch(/claims 6 bytes, below the threshold of 256/)
    const fromBackend = new FrameDecoder(MAX_PACKET_LENGTH, "accept")
    fromBackend.setCompression(256)
    fromBackend.push(bytes)
    const frame = fromBackend.next() as Frame
    expect(frame._tag).toBe("Frame")
    const read = readPacket(frame)
    expect(read._tag === "Packet" && [read.packetId, read.body.toString()]).toEqual([0x6c, "small"])
    // Still bounded: a claim over 8 MiB and data that inflates past its claim are refused from a backend too.
    const liar = Buffer.concat([encodeVarInt(1 + zlib.length), encodeVarInt(3), zlib])
    fromBackend.push(liar)
    expect(asInvalid(readPacket(fromBackend.next() as Frame))).toMatch(/inflates to more than the 3 bytes it claims/)
  })

  it("a limit lowered for a state (login) and raised again", () => {
    const decoder = new FrameDecoder()
    decoder.setMaxPacketLength(64)
    decoder.push(encodeFrame(1, Buffer.alloc(60), -1))
    expect(decoder.next()._tag).toBe("Frame")
    decoder.setMaxPacketLength(MAX_PACKET_LENGTH)
    decoder.push(encodeFrame(1, Buffer.alloc(600), -1))
    expect(decoder.next()._tag).toBe("Frame")
    decoder.setMaxPacketLength(64)
    decoder.push(encodeFrame(1, Buffer.alloc(600), -1))
    expect(asInvalid(decoder.next())).toBe("frame of 601 bytes exceeds 64")
  })

  it("the 2^21-1 limit is the default and is accepted", () => {
    const body = Buffer.alloc(MAX_PACKET_LENGTH - 1)
    const frame = encodeFrame(0, body, -1)
    expect(frame.subarray(0, 3)).toEqual(hex("ffff7f"))
    const read = readOneFrame(frame, -1)
    expect(read._tag === "Frame" && read.end).toBe(frame.length)
  })

  const compressedFrame = (claimed: number, data: Buffer) => {
    const content = Buffer.concat([encodeVarInt(claimed), data])
    return Buffer.concat([encodeVarInt(content.length), content])
  }

  it("a compressed frame whose data inflates to less than it claims", () => {
    const frame = readOneFrame(compressedFrame(1000, deflateSync(Buffer.alloc(500, 1))), 256) as Frame
    expect(frame._tag).toBe("Frame")
    expect(asInvalid(readPacket(frame))).toMatch(/inflates to 500 bytes, not the 1000 it claims/)
    expect(asInvalid(peekPacket(frame, 10))).toMatch(/inflates to 500 bytes, not the 1000 it claims/)
  })

  it("a compressed frame whose data inflates to more than it claims (a zip bomb is cut at the claim)", () => {
    const bomb = deflateSync(Buffer.alloc(8_000_000))
    const frame = readOneFrame(compressedFrame(300, bomb), 256) as Frame
    expect(asInvalid(readPacket(frame))).toMatch(/inflates to more than the 300 bytes it claims/)
    expect(asInvalid(peekPacket(frame, 10))).toMatch(/inflates to more than the 300 bytes it claims/)
  })

  it("zlib garbage", () => {
    const frame = readOneFrame(compressedFrame(300, Buffer.from("definitely not zlib data")), 256) as Frame
    expect(asInvalid(readPacket(frame))).toMatch(/not valid zlib data/)
    expect(asInvalid(peekPacket(frame, 10))).toMatch(/not valid zlib data/)
  })

  it("zlib data cut short", () => {
    const data = deflateSync(randomBytes(400))
    const frame = readOneFrame(compressedFrame(400, data.subarray(0, data.length - 20)), 256) as Frame
    expect(readPacket(frame)._tag).toBe("Invalid")
  })

  it("a compressed packet whose id VarInt is over 5 bytes", () => {
    const frame = readOneFrame(compressedFrame(300, deflateSync(Buffer.concat([hex("8080808080"), Buffer.alloc(295)]))), 256) as Frame
    expect(asInvalid(readPacket(frame))).toMatch(/packet id: VarInt longer than 5 bytes/)
    expect(asInvalid(peekPacket(frame, 4))).toMatch(/packet id: VarInt longer than 5 bytes/)
  })
})

describe("peekPacket", () => {
  it("gives the id and the first body bytes of a compressed packet without inflating all of it", () => {
    const body = Buffer.alloc(1_000_000)
    for (let i = 0; i < body.length; i++) body[i] = (i * 31 + (i >> 8)) & 0xff
    const frameBytes = encodeFrame(0x2a, body, 256)
    // Damage the end of the zlib data: a full inflate must fail, a bounded peek never reaches it.
    frameBytes[frameBytes.length - 3]! ^= 0xff
    const frame = readOneFrame(frameBytes, 256) as Frame
    expect(frame.packetId).toBe(-1)
    const peek = peekPacket(frame, 32)
    expect(peek).toEqual({ _tag: "Peek", packetId: 0x2a, head: body.subarray(0, 32) })
    expect(readPacket(frame)._tag).toBe("Invalid")
  })

  it("agrees with a full read for packets of every size, compressed or not", () => {
    const random = seeded(7)
    for (const { id, body } of samplePackets(random, 60)) {
      for (const threshold of [-1, 256]) {
        const frame = readOneFrame(encodeFrame(id, body, threshold), threshold) as Frame
        for (const n of [0, 1, 20, 400]) {
          expect(peekPacket(frame, n)).toEqual({ _tag: "Peek", packetId: id, head: body.subarray(0, n) })
        }
      }
    }
  })

  it("feeds more compressed bytes when the first ones do not yield enough", () => {
    // A large dynamic-Huffman code table: the first 128 compressed bytes give fewer than the 105 wanted.
    const body = Buffer.alloc(5000)
    for (let i = 0; i < body.length; i++) body[i] = Math.floor(Math.abs(Math.sin(i)) * 256)
    const frame = readOneFrame(encodeFrame(0x05, body, 256), 256) as Frame
    const firstAttempt = inflateSync(frame.buffer.subarray(frame.dataStart, frame.dataStart + 128), { finishFlush: constants.Z_SYNC_FLUSH })
    expect(firstAttempt.length).toBeLessThan(105)
    expect(peekPacket(frame, 100)).toEqual({ _tag: "Peek", packetId: 5, head: body.subarray(0, 100) })
  })
})

describe("encodeFrame", () => {
  it("compresses packets of at least the threshold, as vanilla", () => {
    const at = readOneFrame(encodeFrame(0x01, Buffer.alloc(255), 256), 256) as Frame
    expect(at.uncompressedLength).toBe(256)
    const below = readOneFrame(encodeFrame(0x01, Buffer.alloc(254), 256), 256) as Frame
    expect(below.uncompressedLength).toBe(0)
    expect(below.packetId).toBe(1)
    expect(encodeFrame(0x00, Buffer.from("ab"), -1)).toEqual(hex("03 00 6162"))
    expect(encodeFrame(0x00, Buffer.from("ab"), 256)).toEqual(hex("04 00 00 6162"))
  })

  it("re-frames between connections with different thresholds, and passes bytes as they are between equal ones", () => {
    const bytes = encodeFrame(0x20, Buffer.alloc(600, 6), 256)
    const frame = readOneFrame(bytes, 256) as Frame
    const same = reencodeFrame(frame, 256, 256) as Buffer
    expect(same.buffer).toBe(frame.buffer.buffer)
    expect(same).toEqual(bytes)
    const plain = reencodeFrame(frame, 256, -1) as Buffer
    expect(plain).toEqual(encodeFrame(0x20, Buffer.alloc(600, 6), -1))
    const higher = readOneFrame(reencodeFrame(frame, 256, 1024) as Buffer, 1024) as Frame
    expect(higher.uncompressedLength).toBe(0)
    expect(packetOf(higher)).toEqual({ id: 0x20, body: Buffer.alloc(600, 6) })
  })
})

describe("against minecraft-protocol's framing and compression", () => {
  for (const threshold of [-1, 64, 256]) {
    it(`Portal's frames read by minecraft-protocol (threshold ${threshold})`, async () => {
      const random = seeded(50 + threshold)
      const packets = samplePackets(random, 80)
      const stream = Buffer.concat(packets.map((p) => encodeFrame(p.id, p.body, threshold)))
      const contents = await runTransform(framing.createSplitter(), splitRandomly(stream, random, 3000))
      const packetsOut = threshold < 0 ? contents : await runTransform(compression.createDecompressor(threshold, false), contents)
      const hashes = (buffers: ReadonlyArray<Buffer>) => buffers.map((b) => createHash("sha1").update(b).digest("hex"))
      expect(hashes(packetsOut)).toEqual(hashes(packets.map((p) => Buffer.concat([encodeVarInt(p.id), p.body]))))
    })

    it(`minecraft-protocol's frames read by Portal (threshold ${threshold})`, async () => {
      const random = seeded(90 + threshold)
      const packets = samplePackets(random, 80)
      const contents = packets.map((p) => Buffer.concat([encodeVarInt(p.id), p.body]))
      const compressed = threshold < 0 ? contents : await runTransform(compression.createCompressor(threshold), contents)
      const framed = Buffer.concat(await runTransform(framing.createFramer(), compressed))
      const decoder = new FrameDecoder()
      decoder.setCompression(threshold)
      const got: Array<{ id: number; body: Buffer }> = []
      for (const piece of splitRandomly(framed, random, 3000)) {
        decoder.push(piece)
        got.push(...drain(decoder).map(packetOf))
      }
      expect(summary(got)).toEqual(summary(packets))
    })
  }
})

describe("frames with one-byte VarInts (read without a result object)", () => {
  it("give the packet id, data and body of the general reading, ids 0 to 300 and short bodies, with and without compression", () => {
    for (const threshold of [-1, 256]) {
      for (let id = 0; id <= 300; id++) {
        for (const size of [0, 1, 2, 5]) {
          const body = Buffer.alloc(size, 7)
          const frame = readOneFrame(encodeFrame(id, body, threshold), threshold)
          if (frame._tag !== "Frame") throw new Error(`id ${id}, ${size} bytes: ${frame._tag}`)
          const idSize = id < 128 ? 1 : 2
          expect([frame.packetId, frame.dataStart, frame.bodyStart, frame.uncompressedLength]).toEqual([id, threshold < 0 ? 1 : 2, (threshold < 0 ? 1 : 2) + idSize, 0])
          expect(frame.buffer.subarray(frame.bodyStart, frame.end)).toEqual(body)
        }
      }
    }
  })
})
