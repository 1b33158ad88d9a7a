import { createRequire } from "node:module"
import { describe, expect, it } from "vitest"
import { bungeeGuardProperty, forgeMarker, forgeProperties, legacyForwardingAddress, offlineUuid } from "../../src/protocol/forwarding.js"

describe("forwarding payloads", () => {
  it("offline UUIDs match what offline-mode servers compute", () => {
    expect(offlineUuid("Notch")).toBe("b50ad385-829d-3141-a216-7e7d7539ba7f")
    const { nameToMcOfflineUUID } = createRequire(import.meta.url)("minecraft-protocol/src/datatypes/uuid.js") as {
      nameToMcOfflineUUID(name: string): string
    }
    for (const name of ["jeb_", "Dinnerbone", "a", "Player_123"]) expect(offlineUuid(name)).toBe(nameToMcOfflineUUID(name))
  })

  it("legacy address: host, IP without scope, UUID without dashes, optional properties", () => {
    expect(legacyForwardingAddress({ host: "mc.example.com", clientIp: "fe80::1%eth0", uuid: "b50ad385-829d-3141-a216-7e7d7539ba7f", properties: [] })).toBe(
      "mc.example.com\0fe80::1\0b50ad385829d3141a2167e7d7539ba7f"
    )
    expect(
      legacyForwardingAddress({ host: "h", clientIp: "1.2.3.4", uuid: "00000000-0000-0000-0000-000000000001", properties: [bungeeGuardProperty("s3cret")] })
    ).toBe('h\u00001.2.3.4\u000000000000000000000000000000000001\u0000[{"name":"bungeeguard-token","value":"s3cret","signature":""}]')
  })
})

describe("Forge markers where forwarding drops them", () => {
  it("tells a 1.7-1.12 marker from a 1.13+ one, and neither from other suffixes", () => {
    expect(forgeMarker("\0FML\0")).toBe("legacy")
    expect(forgeMarker("\0FML2\0")).toBe("modern")
    expect(forgeMarker("\0FML3\0")).toBe("modern")
    expect(forgeMarker("\0FORGE")).toBe("modern")
    expect(forgeMarker("")).toBeUndefined()
    expect(forgeMarker("///127.0.0.1///123")).toBeUndefined()
    expect(forgeMarker("\0FMLX\0")).toBeUndefined()
  })

  it("legacy forwarding: forgeClient and extraData for a 1.7-1.12 client, as BungeeCord; modern: forgeClient for 1.13+, as Velocity", () => {
    expect(forgeProperties("\0FML\0", "legacy")).toEqual([
      { name: "forgeClient", value: "true" },
      { name: "extraData", value: "\u0001FML\u0001", signature: "" }
    ])
    expect(forgeProperties("\0FML2\0", "legacy")).toEqual([])
    expect(forgeProperties("\0FML3\0", "modern")).toEqual([{ name: "forgeClient", value: "true" }])
    expect(forgeProperties("\0FML\0", "modern")).toEqual([])
    expect(forgeProperties("", "legacy")).toEqual([])
  })
})
