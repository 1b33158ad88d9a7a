/** VarLong, UUID forms, strings, modified UTF-8 and NBT text components (against prismarine-nbt). */
import { describe, expect, it } from "vitest"
import { decodeModifiedUtf8, encodeJavaUtf } from "../../src/protocol/modifiedUtf8.js"
import { decodeNetworkNbt, encodeNetworkNbt } from "../../src/protocol/nbt.js"
import { PacketReader } from "../../src/protocol/PacketReader.js"
import { PacketWriter } from "../../src/protocol/PacketWriter.js"
import { decoding } from "../../src/protocol/result.js"
import { encodeTextField, readTextField, textComponentNbt } from "../../src/protocol/text.js"
import { parseUuid, undashedUuid, uuidFromBytes, uuidToBytes } from "../../src/protocol/uuid.js"
import { encodeVarLong, readVarLong } from "../../src/protocol/varint.js"
import { nbt } from "./mcPeer.js"

const hex = (text: string) => Buffer.from(text.replace(/\s+/g, ""), "hex")

describe("VarLong", () => {
  // Vectors of the protocol documentation (wiki.vg "VarInt and VarLong").
  const vectors: Array<[bigint, string]> = [
    [0n, "00"],
    [1n, "01"],
    [2n, "02"],
    [127n, "7f"],
    [128n, "8001"],
    [255n, "ff01"],
    [2147483647n, "ffffffff07"],
    [9223372036854775807n, "ffffffffffffffff7f"],
    [-1n, "ffffffffffffffffff01"],
    [-2147483648n, "80808080f8ffffffff01"],
    [-9223372036854775808n, "80808080808080808001"]
  ]
  it("encodes and decodes the reference vectors", () => {
    for (const [value, bytes] of vectors) {
      expect(encodeVarLong(value).toString("hex")).toBe(bytes)
      expect(readVarLong(hex(bytes))).toEqual({ _tag: "Value", value, size: bytes.length / 2 })
    }
  })

  it("waits for more bytes and refuses more than 10", () => {
    expect(readVarLong(hex("8080"))._tag).toBe("Incomplete")
    expect(readVarLong(hex("ffffffffffffffffffff01"))).toEqual({ _tag: "Invalid", reason: "VarLong longer than 10 bytes" })
    expect(decoding("x", () => new PacketReader(hex("ffffffffffffffffffff01")).varLong())._tag).toBe("Invalid")
  })
})

describe("UUID", () => {
  const dashed = "069a79f4-44e9-4726-a5be-fca90e38aaf5"
  it("converts between the wire bytes and both text forms", () => {
    const bytes = hex("069a79f444e94726a5befca90e38aaf5")
    expect(uuidFromBytes(bytes)).toBe(dashed)
    expect(uuidToBytes(dashed)).toEqual({ _tag: "Bytes", bytes })
    expect(uuidToBytes("069A79F444E94726A5BEFCA90E38AAF5")).toEqual({ _tag: "Bytes", bytes })
    expect(parseUuid("069a79f444e94726a5befca90e38aaf5")).toEqual({ _tag: "Uuid", uuid: dashed })
    expect(undashedUuid(dashed)).toBe("069a79f444e94726a5befca90e38aaf5")
    // Two big-endian i64, most significant first.
    const reader = new PacketReader(bytes)
    expect(reader.i64()).toBe(0x069a79f444e94726n)
  })

  it("refuses what is not a UUID", () => {
    for (const text of ["", "069a79f4-44e9-4726-a5be-fca90e38aaf", "zz9a79f444e94726a5befca90e38aaf5", "069a79f4444e9-4726-a5be-fca90e38aaf5"]) {
      expect(parseUuid(text)._tag).toBe("Invalid")
      expect(uuidToBytes(text)._tag).toBe("Invalid")
    }
  })
})

describe("strings, booleans and optional fields", () => {
  it("reads strings up to their limit in characters and refuses longer ones", () => {
    const body = new PacketWriter().string("héllo").bool(true).bool(false).body()
    const reader = new PacketReader(body)
    expect(reader.string(5)).toBe("héllo")
    expect(reader.bool()).toBe(true)
    expect(reader.bool()).toBe(false)
    expect(decoding("s", () => new PacketReader(body).string(4))).toEqual({ _tag: "Invalid", reason: "s: string of 5 characters is too long" })
    expect(decoding("s", () => new PacketReader(hex("0561")).string(10))._tag).toBe("Invalid")
    expect(decoding("s", () => new PacketReader(hex("ff01")).string(10))._tag).toBe("Invalid")
  })

  it("writes and reads optional fields as a boolean and the value", () => {
    const body = new PacketWriter().optional("x", (w, v) => w.string(v)).optional<string>(undefined, (w, v) => w.string(v)).body()
    expect(body).toEqual(hex("01 0178 00"))
    const reader = new PacketReader(body)
    expect(reader.optional((r) => r.string(1))).toBe("x")
    expect(reader.optional((r) => r.string(1))).toBeUndefined()
    expect(decoding("o", () => new PacketReader(hex("01")).optional((r) => r.i64()))._tag).toBe("Invalid")
  })
})

describe("modified UTF-8 (Java's writeUTF)", () => {
  it("writes NUL as C0 80 and supplementary characters as two 3-byte surrogates", () => {
    expect(encodeJavaUtf("a\u0000b")).toEqual(hex("0004 61 c080 62"))
    expect(encodeJavaUtf("é")).toEqual(hex("0002 c3a9"))
    expect(encodeJavaUtf("😀")).toEqual(hex("0006 eda0bd edb880"))
    for (const text of ["", "plain", "a\u0000b", "é€😀", "x".repeat(1000)]) {
      const bytes = encodeJavaUtf(text) as Buffer
      expect(decodeModifiedUtf8(bytes, 2, bytes.readUInt16BE(0))).toBe(text)
    }
  })

  it("refuses texts over 65535 bytes and malformed input", () => {
    expect(encodeJavaUtf("é".repeat(40_000))).toMatchObject({ _tag: "Invalid" })
    expect(decodeModifiedUtf8(hex("c0"), 0, 1)).toMatchObject({ _tag: "Invalid" })
    expect(decodeModifiedUtf8(hex("ff"), 0, 1)).toMatchObject({ _tag: "Invalid" })
    expect(decodeModifiedUtf8(hex("e0 80 41"), 0, 3)).toMatchObject({ _tag: "Invalid" })
    expect(decodeModifiedUtf8(hex("41"), 0, 2)).toMatchObject({ _tag: "Invalid" })
  })
})

describe("network NBT against prismarine-nbt", () => {
  const parse = (bytes: Buffer) => {
    const parsed = nbt.protos.big.parsePacketBuffer("anonymousNbt", bytes)
    expect(parsed.metadata.size).toBe(bytes.length)
    return nbt.simplify(parsed.data)
  }

  it("writes the text compounds Portal sends as prismarine-nbt reads them", () => {
    const component = {
      text: "Server ",
      color: "gold",
      bold: true,
      italic: false,
      extra: ["is ", { text: "restarting", color: "red", underlined: true, extra: [{ text: "!" }] }],
      clickEvent: { action: "open_url", value: "https://example.com" }
    }
    const bytes = textComponentNbt(component)
    expect(bytes[0]).toBe(10)
    expect(parse(bytes)).toEqual({
      text: "Server ",
      color: "gold",
      bold: 1,
      italic: 0,
      extra: [{ text: "is " }, { text: "restarting", color: "red", underlined: 1, extra: [{ text: "!" }] }],
      clickEvent: { action: "open_url", value: "https://example.com" }
    })
    expect(parse(textComponentNbt("plain"))).toEqual({ text: "plain" })
  })

  it("matches prismarine-nbt's bytes for the same typed value", () => {
    const typed = {
      type: "compound",
      name: "",
      value: {
        text: { type: "string", value: "hi" },
        bold: { type: "byte", value: 1 },
        extra: { type: "list", value: { type: "compound", value: [{ text: { type: "string", value: "x" } }] } },
        n: { type: "int", value: -5 },
        d: { type: "double", value: 1.5 },
        l: { type: "long", value: [0, 7] },
        empty: { type: "list", value: { type: "end", value: [] } }
      }
    }
    const theirs = nbt.protos.big.createPacketBuffer("anonymousNbt", typed)
    const ours = encodeNetworkNbt({ text: "hi", bold: true, extra: [{ text: "x" }], n: -5, d: 1.5, l: 7n, empty: [] })
    expect(ours.toString("hex")).toBe(theirs.toString("hex"))
  })

  it("wraps the elements of mixed lists as {\"\": element}, as vanilla does", () => {
    expect(parse(encodeNetworkNbt({ list: ["a", 1, { b: "c" }, { "": "d" }] }))).toEqual({
      list: [{ "": "a" }, { "": 1 }, { b: "c" }, { "": { "": "d" } }]
    })
  })

  it("reads what prismarine-nbt writes, every tag type", () => {
    const typed = {
      type: "compound",
      name: "",
      value: {
        b: { type: "byte", value: -3 },
        s: { type: "short", value: 300 },
        i: { type: "int", value: 70000 },
        l: { type: "long", value: [1, 2] },
        f: { type: "float", value: 0.5 },
        d: { type: "double", value: -2.25 },
        ba: { type: "byteArray", value: [1, -1] },
        str: { type: "string", value: "héllo" },
        list: { type: "list", value: { type: "string", value: ["x", "y"] } },
        comp: { type: "compound", value: { inner: { type: "int", value: 1 } } },
        ia: { type: "intArray", value: [1, 2, 3] },
        la: { type: "longArray", value: [[0, 1]] },
        ["__proto__"]: { type: "string", value: "not a prototype" }
      }
    }
    const bytes = nbt.protos.big.createPacketBuffer("anonymousNbt", typed)
    const read = decodeNetworkNbt(bytes)
    if (read._tag !== "Nbt") throw new Error(read.reason)
    expect(read.size).toBe(bytes.length)
    const value = read.value as Record<string, unknown>
    expect(value).toMatchObject({
      b: -3,
      s: 300,
      i: 70000,
      l: (1n << 32n) | 2n,
      f: 0.5,
      d: -2.25,
      ba: [1, -1],
      str: "héllo",
      list: ["x", "y"],
      comp: { inner: 1 },
      ia: [1, 2, 3],
      la: [1n]
    })
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype)
    expect(Object.getOwnPropertyDescriptor(value, "__proto__")?.value).toBe("not a prototype")
  })

  it("refuses truncated, malformed and too deeply nested NBT", () => {
    const good = textComponentNbt({ text: "hello", extra: [{ text: "x" }] })
    for (let cut = 1; cut < good.length; cut++) expect(decodeNetworkNbt(good.subarray(0, cut))._tag).toBe("Invalid")
    expect(decodeNetworkNbt(hex("0d"))).toEqual({ _tag: "Invalid", reason: "unknown NBT tag 13" })
    expect(decodeNetworkNbt(hex("09 00 00000001"))._tag).toBe("Invalid")
    expect(decodeNetworkNbt(hex("07 ffffffff"))._tag).toBe("Invalid")
    expect(decodeNetworkNbt(hex("09 08 7fffffff"))._tag).toBe("Invalid")
    const deep = Buffer.concat([Buffer.from([9]), Buffer.from(Array.from({ length: 600 }, () => [9, 0, 0, 0, 1]).flat())])
    expect(decodeNetworkNbt(deep)).toMatchObject({ _tag: "Invalid" })
  })
})

describe("text fields by version", () => {
  it("are JSON strings before 1.20.3 and NBT from 765, and read back", () => {
    const message = { text: "Bye", color: "red" }
    const json = encodeTextField(message, 764)
    expect(json).toEqual(new PacketWriter().string('{"text":"Bye","color":"red"}').body())
    expect(decoding("t", () => readTextField(new PacketReader(json), 764))).toEqual({ _tag: "Ok", value: message })
    const binary = encodeTextField(message, 765)
    expect(binary).toEqual(textComponentNbt(message))
    expect(decoding("t", () => readTextField(new PacketReader(binary), 765))).toEqual({ _tag: "Ok", value: message })
    expect(decoding("t", () => readTextField(new PacketReader(new PacketWriter().string("§cnot json").body()), 47))).toEqual({
      _tag: "Ok",
      value: "§cnot json"
    })
  })
})
