/** Legacy (pre-1.7) pings and kicks, against the hand-written bytes of the protocol notes. */
import { describe, expect, it } from "vitest"
import { detectLegacy, encodeLegacyKick, encodeLegacyPingResponse } from "../../src/protocol/legacy.js"

const hex = (text: string) => Buffer.from(text.replace(/\s+/g, ""), "hex")
// 1.6.4 pinging localhost:25565
const PING_16 = hex(
  "fe 01 fa 00 0b 00 4d 00 43 00 7c 00 50 00 69 00 6e 00 67 00 48 00 6f 00 73 00 74 00 19 4e 00 09 00 6c 00 6f 00 63 00 61 00 6c 00 68 00 6f 00 73 00 74 00 00 63 dd"
)

describe("detection", () => {
  it("recognises the three ping generations", () => {
    expect(detectLegacy(hex("fe"))).toEqual({ _tag: "MaybePing", ping: { _tag: "Beta" } })
    expect(detectLegacy(hex("fe01"))).toEqual({ _tag: "MaybePing", ping: { _tag: "V1_4" } })
    expect(detectLegacy(PING_16)).toEqual({ _tag: "Ping", ping: { _tag: "V1_6", protocolVersion: 0x4e, host: "localhost", port: 25565 } })
  })

  it("waits for a partial 1.6 ping", () => {
    for (const cut of [3, 10, 30, PING_16.length - 1]) expect(detectLegacy(PING_16.subarray(0, cut))._tag).toBe("NeedMore")
  })

  it("a modern frame of 254 bytes starting FE 01 is modern (third byte is not FA)", () => {
    expect(detectLegacy(hex("fe 01 00 ff"))._tag).toBe("Modern")
    expect(detectLegacy(hex("fe 02"))._tag).toBe("Modern")
    expect(detectLegacy(hex("10 00"))._tag).toBe("Modern")
  })

  it("a pre-1.7 login starts with 02", () => {
    expect(detectLegacy(hex("02 4e 00 05"))._tag).toBe("Login")
  })

  it("a corrupted 1.6 ping is invalid, not a crash", () => {
    const broken = Buffer.from(PING_16)
    broken[4] = 0x05 // channel name length
    expect(detectLegacy(broken)._tag).toBe("Invalid")
    const lying = Buffer.from(PING_16)
    lying.writeUInt16BE(0xffff, 27) // data length
    expect(detectLegacy(lying)._tag).toBe("Invalid")
  })
})

describe("answers", () => {
  const status = { protocolVersion: 127, versionName: "1.6.4", motd: "§aHello", online: 3, max: 20 }

  it("1.4+ answers carry protocol, version, MOTD and counts separated by NUL", () => {
    const kick = encodeLegacyPingResponse({ _tag: "V1_4" }, status)
    expect(kick[0]).toBe(0xff)
    const text = Buffer.from(kick.subarray(3)).swap16().toString("utf16le")
    expect(kick.readUInt16BE(1)).toBe(text.length)
    expect(text).toBe("§1\u0000127\u00001.6.4\u0000§aHello\u00003\u000020")
  })

  it("beta answers are motd§online§max without formatting codes", () => {
    const kick = encodeLegacyPingResponse({ _tag: "Beta" }, status)
    expect(Buffer.from(kick.subarray(3)).swap16().toString("utf16le")).toBe("Hello§3§20")
  })

  it("a kick is FF, length in UTF-16 units, UTF-16BE text", () => {
    expect(encodeLegacyKick("Hi")).toEqual(hex("ff 0002 0048 0069"))
  })
})
