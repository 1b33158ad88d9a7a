/** PROXY protocol v1 and v2 headers. */
import { describe, expect, it } from "vitest"
import { encodeProxyV2, readProxyHeader, V2_SIGNATURE } from "../../src/protocol/proxyProtocol.js"

const v2 = (versionCommand: number, family: number, block: Buffer) => {
  const header = Buffer.alloc(16)
  V2_SIGNATURE.copy(header)
  header[12] = versionCommand
  header[13] = family
  header.writeUInt16BE(block.length, 14)
  return Buffer.concat([header, block])
}

describe("v1", () => {
  it("TCP4, TCP6 and UNKNOWN", () => {
    const tcp4 = Buffer.from("PROXY TCP4 203.0.113.7 10.0.0.1 51234 25565\r\nrest")
    expect(readProxyHeader(tcp4)).toEqual({
      _tag: "Header",
      version: 1,
      source: { address: "203.0.113.7", port: 51234 },
      destination: { address: "10.0.0.1", port: 25565 },
      length: tcp4.length - 4
    })
    expect(readProxyHeader(Buffer.from("PROXY TCP6 2001:db8::1 ::1 1 2\r\n"))).toMatchObject({ source: { address: "2001:db8::1" } })
    expect(readProxyHeader(Buffer.from("PROXY UNKNOWN\r\n"))).toMatchObject({ _tag: "Header", source: undefined })
  })

  it("waits for the end of line, refuses malformed and overlong headers", () => {
    expect(readProxyHeader(Buffer.from("PROXY TCP4 1.2.3.4"))._tag).toBe("Incomplete")
    expect(readProxyHeader(Buffer.from("PRO"))._tag).toBe("Incomplete")
    expect(readProxyHeader(Buffer.from("PROXY TCP4 1.2.3 1.2.3.4 1 2\r\n"))._tag).toBe("Invalid")
    expect(readProxyHeader(Buffer.from("PROXY TCP4 ::1 1.2.3.4 1 2\r\n"))._tag).toBe("Invalid")
    expect(readProxyHeader(Buffer.from("PROXY TCP4 1.2.3.4 1.2.3.4 1 99999\r\n"))._tag).toBe("Invalid")
    expect(readProxyHeader(Buffer.from(`PROXY ${"x".repeat(120)}`))._tag).toBe("Invalid")
    expect(readProxyHeader(Buffer.from([0x10, 0x00]))._tag).toBe("Invalid")
  })
})

describe("v2", () => {
  it("TCP4 with TLVs skipped, TCP6, LOCAL", () => {
    const block = Buffer.from([203, 0, 113, 7, 10, 0, 0, 1, 0xc8, 0x22, 0x63, 0xdd, 0x01, 0x00, 0x02, 0x68, 0x32])
    const header = v2(0x21, 0x11, block)
    expect(readProxyHeader(Buffer.concat([header, Buffer.from([0x10])]))).toEqual({
      _tag: "Header",
      version: 2,
      source: { address: "203.0.113.7", port: 51234 },
      destination: { address: "10.0.0.1", port: 25565 },
      length: header.length
    })
    const six = Buffer.alloc(36)
    six[0] = 0x20
    six[1] = 0x01
    six[15] = 0x09
    six[31] = 0x01
    six.writeUInt16BE(4000, 32)
    six.writeUInt16BE(25565, 34)
    expect(readProxyHeader(v2(0x21, 0x21, six))).toMatchObject({ source: { address: "2001::9", port: 4000 } })
    expect(readProxyHeader(v2(0x20, 0x00, Buffer.alloc(0)))).toMatchObject({ _tag: "Header", source: undefined })
  })

  it("waits for a partial header and refuses bad versions, commands and huge lengths", () => {
    const full = v2(0x21, 0x11, Buffer.alloc(12))
    expect(readProxyHeader(full.subarray(0, 20))._tag).toBe("Incomplete")
    expect(readProxyHeader(full.subarray(0, 5))._tag).toBe("Incomplete")
    expect(readProxyHeader(v2(0x11, 0x11, Buffer.alloc(12)))._tag).toBe("Invalid")
    expect(readProxyHeader(v2(0x25, 0x11, Buffer.alloc(12)))._tag).toBe("Invalid")
    expect(readProxyHeader(v2(0x21, 0x11, Buffer.alloc(4)))._tag).toBe("Invalid")
    const huge = v2(0x21, 0x11, Buffer.alloc(12))
    huge.writeUInt16BE(60000, 14)
    expect(readProxyHeader(huge)._tag).toBe("Invalid")
  })

  it("encodes what it reads (IPv4, IPv6 and mixed families)", () => {
    const four = encodeProxyV2({ address: "198.51.100.2", port: 40000 }, { address: "10.1.2.3", port: 25565 })
    expect(readProxyHeader(four)).toMatchObject({
      source: { address: "198.51.100.2", port: 40000 },
      destination: { address: "10.1.2.3", port: 25565 }
    })
    const six = encodeProxyV2({ address: "2001:db8::5", port: 1 }, { address: "::1", port: 2 })
    expect(readProxyHeader(six)).toMatchObject({ source: { address: "2001:db8::5" }, destination: { address: "::1" } })
    const mixed = encodeProxyV2({ address: "::ffff:192.0.2.1", port: 3 }, { address: "10.0.0.1", port: 4 })
    expect(readProxyHeader(mixed)).toMatchObject({ source: { address: "192.0.2.1" } })
  })
})
