/** Address keys: every spelling of one address is one key, checked against Node's own parser. */
import { isIP } from "node:net"
import { describe, expect, it } from "vitest"
import { addressKey, keyText } from "../../../src/services/shared/ipKey.js"

const key = (text: string): string => {
  const out = new Int32Array(4)
  addressKey(text, out)
  return keyText(out)
}

/** The 128 bits Node reads from an address (its URL parser), in keyText's spelling (IPv4 as ::ffff:a.b.c.d). */
const nodeKey = (text: string): string => {
  const family = isIP(text)
  if (family === 0) throw new Error(`node cannot parse ${text}`)
  const words = new Int32Array(4)
  if (family === 4) {
    const parts = new URL(`http://${text}/`).hostname.split(".").map(Number)
    words[2] = 0xffff
    words[3] = ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) | 0
  } else {
    // The URL parser's canonical form, expanded to eight groups.
    const canonical = new URL(`http://[${text}]/`).hostname.slice(1, -1)
    const [head, tail] = canonical.includes("::") ? canonical.split("::") : [canonical, undefined]
    const left = head === "" ? [] : head!.split(":")
    const right = tail === undefined || tail === "" ? [] : tail.split(":")
    const groups = [...left, ...Array(8 - left.length - right.length).fill("0"), ...right].map((g) => parseInt(g, 16))
    for (let w = 0; w < 4; w++) words[w] = (groups[2 * w]! << 16) | groups[2 * w + 1]!
  }
  return keyText(words)
}

describe("addressKey", () => {
  it("reads IPv4 and IPv6 as Node does", () => {
    const samples = [
      "0.0.0.0",
      "127.0.0.1",
      "255.255.255.255",
      "10.20.30.40",
      "::",
      "::1",
      "1::",
      "2001:db8::1",
      "2001:DB8:0:0:8:800:200C:417A",
      "fe80::1:2:3:4",
      "1:2:3:4:5:6:7:8",
      "1:2:3:4:5:6:7::",
      "::2:3:4:5:6:7:8",
      "1:0:0:2::3",
      "64:ff9b::192.0.2.33"
    ]
    for (const text of samples) expect(key(text), text).toBe(nodeKey(text))
  })

  it("makes IPv4-mapped IPv6, in either spelling, the same key as IPv4", () => {
    expect(key("::ffff:192.0.2.1")).toBe(key("192.0.2.1"))
    expect(key("::FFFF:c000:201")).toBe(key("192.0.2.1"))
    expect(key("0:0:0:0:0:ffff:192.0.2.1")).toBe(key("192.0.2.1"))
    expect(key("192.0.2.1")).toBe("0:0:0:0:0:ffff:c000:201")
    expect(key("::192.0.2.1")).not.toBe(key("192.0.2.1"))
  })

  it("ignores a zone id", () => {
    expect(key("fe80::1%eth0")).toBe(key("fe80::1"))
  })

  it("keys text that is no address by a hash in ff00::/8, distinct per text", () => {
    const invalid = ["unknown", "", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.04x", ":::", "1:2:3:4:5:6:7:8:9"]
    invalid.push("12345::", "1::2::3", "1:", "[::1]", "1.2.3.4:")
    const keys = invalid.map(key)
    for (const [i, k] of keys.entries()) expect(k.startsWith("ff"), invalid[i]).toBe(true)
    expect(new Set(keys).size).toBe(invalid.length)
    expect(key("unknown")).toBe(key("unknown"))
  })

  it("agrees with Node on random addresses", () => {
    let seed = 7
    const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0)
    for (let i = 0; i < 2000; i++) {
      const groups = Array.from({ length: 8 }, () => (next() >>> 8) % (next() % 3 === 0 ? 1 : 65536))
      const text = groups.map((g) => g.toString(16)).join(":")
      const compressed = new URL(`http://[${text}]/`).hostname.slice(1, -1)
      expect(key(compressed), compressed).toBe(nodeKey(text))
      const v4 = [next() & 255, next() & 255, next() & 255, next() & 255].join(".")
      expect(key(v4), v4).toBe(nodeKey(v4))
    }
  })
})
