/** Wire codecs against the byte examples of the protocol notes and against minecraft-protocol's own serializer. */
import { createRequire } from "node:module"
import { describe, expect, it } from "vitest"
import { readFrame } from "../../src/protocol/frame.js"
import { decodeHandshakeBody, encodeHandshake, splitAddress } from "../../src/protocol/handshake.js"
import { decodeLoginStartBody, encodeLoginDisconnect } from "../../src/protocol/login.js"
import { PacketReader } from "../../src/protocol/PacketReader.js"
import { ProtocolError } from "../../src/protocol/ProtocolError.js"
import { encodePongFromBody, encodeStatusResponse } from "../../src/protocol/status.js"
import { encodeVarInt, readVarInt } from "../../src/protocol/varint.js"

const require = createRequire(import.meta.url)
const mc = require("minecraft-protocol") as {
  createSerializer(options: { state: string; isServer: boolean; version: string }): {
    createPacketBuffer(packet: { name: string; params: Record<string, unknown> }): Buffer
  }
}
const hex = (text: string) => Buffer.from(text.replace(/\s+/g, ""), "hex")

describe("VarInt", () => {
  it("round-trips edge values", () => {
    for (const value of [0, 1, 127, 128, 255, 25565, 2097151, 2147483647, -1]) {
      const bytes = encodeVarInt(value)
      const read = readVarInt(bytes)
      expect(read).toEqual({ _tag: "Value", value: value | 0, size: bytes.length })
    }
    expect(encodeVarInt(-1)).toEqual(hex("ffffffff0f"))
  })

  it("waits for more bytes, and refuses more than 5 bytes", () => {
    expect(readVarInt(hex("80"))._tag).toBe("Incomplete")
    expect(readVarInt(hex("8080808080"))).toEqual({ _tag: "Invalid", reason: "VarInt longer than 5 bytes" })
    expect(() => new PacketReader(hex("ffffffffff01")).varInt()).toThrow(ProtocolError)
  })
})

describe("frames", () => {
  it("reads a whole frame, waits for a partial one, refuses oversize and empty ones", () => {
    const frame = hex("0500 01020304")
    expect(readFrame(frame, 0, 100)).toEqual({ _tag: "Frame", packetId: 0, bodyStart: 2, end: 6 })
    expect(readFrame(frame.subarray(0, 4), 0, 100)._tag).toBe("Incomplete")
    expect(readFrame(hex("ff01"), 0, 100)).toEqual({ _tag: "Invalid", reason: "frame of 255 bytes exceeds 100" })
    expect(readFrame(hex("00"), 0, 100)._tag).toBe("Invalid")
  })
})

describe("handshake", () => {
  // protocol 769, mc.example.com, 25565, login (the example of the protocol notes)
  const example = hex("15 00 81 06 0e 6d 63 2e 65 78 61 6d 70 6c 65 2e 63 6f 6d 63 dd 02")

  it("decodes the reference bytes and encodes them back identically", () => {
    const frame = readFrame(example, 0, 1000)
    if (frame._tag !== "Frame") throw new Error("no frame")
    const handshake = decodeHandshakeBody(example.subarray(frame.bodyStart, frame.end))
    expect(handshake).toEqual({ protocolVersion: 769, address: "mc.example.com", port: 25565, nextState: 2 })
    expect(encodeHandshake(handshake)).toEqual(example)
  })

  it("matches minecraft-protocol's serializer, including transfer (next state 3)", () => {
    const serializer = mc.createSerializer({ state: "handshaking", isServer: false, version: "1.21.4" })
    for (const nextState of [1, 2, 3]) {
      const theirs = serializer.createPacketBuffer({
        name: "set_protocol",
        params: { protocolVersion: 769, serverHost: "Play.Example.com\0FML2\0", serverPort: 25565, nextState }
      })
      const decoded = decodeHandshakeBody(theirs.subarray(1))
      expect(decoded).toEqual({ protocolVersion: 769, address: "Play.Example.com\0FML2\0", port: 25565, nextState })
      expect(encodeHandshake(decoded).subarray(1)).toEqual(theirs)
    }
  })

  it("refuses unknown next states, trailing bytes and truncation", () => {
    const body = (tail: string) => hex(`8106 0161 63dd ${tail}`)
    expect(() => decodeHandshakeBody(body("04"))).toThrow(/unknown next state 4/)
    expect(() => decodeHandshakeBody(body("0200"))).toThrow(/unexpected bytes/)
    expect(() => decodeHandshakeBody(hex("8106 05 6162"))).toThrow(/truncated/)
  })

  it("normalises addresses for routing and keeps the markers", () => {
    expect(splitAddress("Play.Example.COM.")).toEqual({ host: "play.example.com", rawHost: "Play.Example.COM.", suffix: "" })
    expect(splitAddress("mc.example.com\0FML\0")).toMatchObject({ host: "mc.example.com", suffix: "\0FML\0" })
    expect(splitAddress("mc.example.com\0FML2\0")).toMatchObject({ host: "mc.example.com", suffix: "\0FML2\0" })
    expect(splitAddress("mc.example.com\0FML3\0")).toMatchObject({ host: "mc.example.com", suffix: "\0FML3\0" })
    expect(splitAddress("mc.example.com\0FORGE2")).toMatchObject({ host: "mc.example.com", suffix: "\0FORGE2" })
    expect(splitAddress("mc.example.com\0^Floodgate^abc")).toMatchObject({ host: "mc.example.com" })
    expect(splitAddress("mc.example.com.///1.2.3.4:5555///123///sig")).toMatchObject({
      host: "mc.example.com",
      suffix: "///1.2.3.4:5555///123///sig"
    })
  })
})

describe("Login Start", () => {
  const uuid = "069a79f4-44e9-4726-a5be-fca90e38aaf5"
  const cases: Array<[string, Record<string, unknown>, string | undefined]> = [
    ["1.8.8", { username: "Notch" }, undefined],
    ["1.12.2", { username: "Notch" }, undefined],
    ["1.19", { username: "Notch", signature: { timestamp: 5n, publicKey: Buffer.alloc(20, 1), signature: Buffer.alloc(30, 2) } }, undefined],
    ["1.19.2", { username: "Notch", signature: undefined, playerUUID: uuid }, uuid],
    ["1.19.4", { username: "Notch", playerUUID: uuid }, uuid],
    ["1.20.1", { username: "Notch" }, undefined],
    ["1.20.2", { username: "Notch", playerUUID: uuid }, uuid],
    ["1.21.4", { username: "Notch", playerUUID: uuid }, uuid]
  ]
  const protocols: Record<string, number> = {
    "1.8.8": 47, "1.12.2": 340, "1.19": 759, "1.19.2": 760, "1.19.4": 762, "1.20.1": 763, "1.20.2": 764, "1.21.4": 769
  }

  it.each(cases)("decodes what a %s client sends", (version, params, expectedUuid) => {
    const packet = mc.createSerializer({ state: "login", isServer: false, version }).createPacketBuffer({ name: "login_start", params })
    expect(packet[0]).toBe(0x00)
    const { publicKey, ...start } = decodeLoginStartBody(packet.subarray(1), protocols[version]!)
    expect(start).toEqual({ name: "Notch", uuid: expectedUuid })
    // A 1.19 client's chat key is kept for modern forwarding v2.
    expect(publicKey).toEqual(version === "1.19" ? { expiresAt: 5n, key: Buffer.alloc(20, 1), signature: Buffer.alloc(30, 2) } : undefined)
  })

  it("refuses overlong and empty names", () => {
    expect(() => decodeLoginStartBody(Buffer.concat([encodeVarInt(17), Buffer.from("a".repeat(17))]), 47)).toThrow(/too long/)
    expect(() => decodeLoginStartBody(hex("00"), 47)).toThrow(/empty/)
  })
})

describe("small packets", () => {
  it("a login Disconnect matches the reference bytes", () => {
    expect(encodeLoginDisconnect("Bye")).toEqual(hex("10 00 0e 7b 22 74 65 78 74 22 3a 22 42 79 65 22 7d"))
  })

  it("a status response and pong", () => {
    const response = encodeStatusResponse('{"a":1}')
    expect(response).toEqual(hex("09 00 07 7b2261223a317d"))
    expect(encodePongFromBody(hex("0102030405060708"))).toEqual(hex("09 01 0102030405060708"))
  })
})

describe("frame lengths", () => {
  it("a 254-byte frame is written FE 81 00 so that it cannot look like a legacy ping; it decodes the same", async () => {
    const { frameLength } = await import("../../src/protocol/PacketWriter.js")
    expect(frameLength(254)).toEqual(hex("fe8100"))
    expect(readVarInt(hex("fe8100"))).toEqual({ _tag: "Value", value: 254, size: 3 })
    expect(frameLength(253)).toEqual(hex("fd01"))
    expect(frameLength(300)).toEqual(encodeVarInt(300))
  })
})
