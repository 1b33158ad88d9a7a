import { describe, expect, it } from "vitest"
import { StatusCache } from "../../src/services/status/StatusCache.js"
import { composeStatus, overlayOnline, toLegacyStatus } from "../../src/services/status/motd.js"

describe("StatusCache", () => {
  it("serves fresh entries within the ttl and keeps them afterwards as stale fallbacks", () => {
    const cache = new StatusCache<string>()
    cache.set("a", "A", 1000, 10)
    expect(cache.fresh("a", 1999, 1000)?.value).toBe("A")
    expect(cache.fresh("a", 2000, 1000)).toBeUndefined()
    expect(cache.stale("a", 2000, 31_000)).toBe("A")
    // Past the stale bound, a server that stopped answering is no longer shown as it was.
    expect(cache.stale("a", 31_999, 31_000)).toBe("A")
    expect(cache.stale("a", 32_000, 31_000)).toBeUndefined()
  })

  it("does not serve an entry stored after now (the clock was stepped back) as fresh", () => {
    const cache = new StatusCache<string>()
    cache.set("a", "A", 3_600_000, 10)
    expect(cache.fresh("a", 0, 1000)).toBeUndefined()
    expect(cache.stale("a", 0, 3_600_001)).toBe("A") // still the stale fallback, for as long as the step
  })

  it("evicts the least recently used entry past max_entries", () => {
    const cache = new StatusCache<string>()
    cache.set("a", "A", 0, 2)
    cache.set("b", "B", 0, 2)
    cache.fresh("a", 0, 1000) // a is now the most recently used
    cache.set("c", "C", 0, 2)
    expect(cache.keys()).toEqual(["a", "c"])
    cache.set("d", "D", 0, 0)
    expect(cache.size).toBe(2) // max_entries 0 caches nothing
  })
})

describe("MOTD answers", () => {
  it("overlays configured fields and passes unknown fields through", () => {
    const live = { version: { name: "Paper 1.21", protocol: 767 }, players: { max: 20, online: 3 }, description: "x", forgeData: { mods: [] } }
    expect(overlayOnline(live, { text: "§aHi", version_name: "Net", max_players: 100, favicon: "data:image/png;base64,AA" })).toEqual({
      version: { name: "Net", protocol: 767 },
      players: { max: 100, online: 3 },
      description: "§aHi",
      forgeData: { mods: [] },
      favicon: "data:image/png;base64,AA"
    })
    expect(overlayOnline(live, undefined)).toBe(live)
  })

  it("composes an answer from the MOTD entry and live counts", () => {
    expect(composeStatus({ entry: { text: "§7zzz" }, fallbackText: "x", protocolVersion: 765, online: 2, max: 10 })).toEqual({
      version: { name: "Portal", protocol: 765 },
      players: { max: 10, online: 2, sample: [] },
      description: "§7zzz"
    })
    const labelled = composeStatus({ entry: { text: "t", version_name: "Sleeping", max_players: 50 }, fallbackText: "x", protocolVersion: 765, online: 0, max: 10 })
    expect(labelled.version).toEqual({ name: "Sleeping", protocol: -1 })
    expect(labelled.players?.max).toBe(50)
    expect(composeStatus({ entry: undefined, fallbackText: "fallback", protocolVersion: 1, online: 0, max: 0 }).description).toBe("fallback")
  })

  it("flattens chat components for legacy clients", () => {
    const legacy = toLegacyStatus({
      version: { name: "1.21", protocol: 767 },
      players: { max: 5, online: 1 },
      description: { text: "A", color: "green", extra: [{ text: "B", bold: true }] }
    })
    expect(legacy).toEqual({ protocolVersion: 767, versionName: "1.21", motd: "§aA§lB", online: 1, max: 5 })
  })
})
