import { createRequire } from "node:module"
import { describe, expect, it } from "vitest"
import { bungeeGuardProperty, legacyForwardingAddress, offlineUuid } from "../../src/protocol/forwarding.js"

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
