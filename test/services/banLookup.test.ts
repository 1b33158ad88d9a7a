/** The ban index's address lookups: exact addresses, ranges of any prefix in both families, expiry. */
import { describe, expect, it } from "vitest"
import type { Ban } from "../../src/services/bans/file.js"
import { buildIndex, findIpBan } from "../../src/services/bans/lookup.js"

const ban = (value: string, reason: string, expires_at: number | null = null): Ban => ({
  target: { type: "ip", value },
  reason,
  created_at: 0,
  expires_at,
  source: "test"
})

describe("findIpBan", () => {
  const index = buildIndex([
    ban("10.0.0.0/8", "ten"),
    ban("192.168.1.0/24", "home", 100),
    ban("192.168.0.0/16", "wider"),
    ban("203.0.113.7", "one"),
    ban("198.51.100.128/25", "upper half"),
    ban("0.0.0.0/0", "everything", 50),
    ban("2001:db8::/32", "doc"),
    ban("2001:db8:bad::/48", "bad", 100),
    ban("fe80::1", "link")
  ])

  it("finds an address in a range of any prefix length, and only there", () => {
    const reason = (ip: string, nowMs = 1_000_000) => findIpBan(index, ip, nowMs)?.reason
    expect(reason("10.255.1.2")).toBe("ten")
    expect(reason("11.0.0.1")).toBeUndefined()
    expect(reason("192.168.7.7")).toBe("wider")
    expect(reason("203.0.113.7")).toBe("one")
    expect(reason("203.0.113.8")).toBeUndefined()
    expect(reason("198.51.100.200")).toBe("upper half")
    expect(reason("198.51.100.127")).toBeUndefined()
    expect(reason("2001:db8:1::5")).toBe("doc")
    expect(reason("2001:db9::5")).toBeUndefined()
    expect(reason("fe80::1")).toBe("link")
    // An IPv4-mapped client address is its IPv4 address.
    expect(reason("::ffff:10.1.2.3")).toBe("ten")
  })

  it("skips a range whose ban has ended for one that still holds", () => {
    // Before 100 s the narrower ban holds; after it, the wider one still does; the /0 ended at 50 s.
    expect(findIpBan(index, "192.168.1.5", 40_000)?.reason).toMatch(/home|wider|everything/)
    expect(findIpBan(index, "192.168.1.5", 200_000)?.reason).toBe("wider")
    expect(findIpBan(index, "8.8.8.8", 40_000)?.reason).toBe("everything")
    expect(findIpBan(index, "8.8.8.8", 60_000)).toBeUndefined()
    expect(findIpBan(index, "2001:db8:bad::1", 200_000)?.reason).toBe("doc")
  })
})
