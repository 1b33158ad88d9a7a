/** The generated packet-id table: up to date with minecraft-data, complete, and right where the protocol notes say. */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { describe, expect, it } from "vitest"
import { packetIdsFor, SUPPORTED_PROTOCOLS, supportedRangeText, versionNamesOf } from "../../src/protocol/packetIds.js"

const require = createRequire(import.meta.url)

describe("packet id table", () => {
  it("is what scripts/generate-packet-ids.mjs writes today (regenerate it when this fails)", () => {
    const generated = execFileSync(process.execPath, ["scripts/generate-packet-ids.mjs", "--stdout"], { encoding: "utf8" })
    expect(generated).toBe(readFileSync("src/protocol/packetIds.generated.ts", "utf8"))
  })

  it("covers every version minecraft-protocol supports", () => {
    const { supportedVersions } = require("minecraft-protocol") as { supportedVersions: ReadonlyArray<string> }
    type Entry = { minecraftVersion: string; majorVersion: string; version: number; usesNetty: boolean }
    const { versions } = require("minecraft-data") as { versions: { pc: ReadonlyArray<Entry> } }
    // Newest first: "1.7" (a major version name) finds 1.7.10.
    const protocolOf = (name: string) =>
      (versions.pc.find((v) => v.minecraftVersion === name) ?? versions.pc.find((v) => v.majorVersion === name && v.usesNetty))!.version
    expect(supportedVersions.length).toBeGreaterThan(25)
    for (const name of supportedVersions) {
      const protocol = protocolOf(name)
      expect(packetIdsFor(protocol), name).toBeDefined()
      expect(versionNamesOf(protocol), name).toContain(name === "1.7" ? "1.7.10" : name)
    }
    expect(SUPPORTED_PROTOCOLS.minProtocol).toBe(5)
    expect(SUPPORTED_PROTOCOLS.maxProtocol).toBe(775)
    expect(supportedRangeText()).toBe("1.7.6 to 26.1.2")
  })

  it("knows nothing of versions outside it", () => {
    for (const protocol of [4, 0, -1, 776, 1_073_741_839]) expect(packetIdsFor(protocol)).toBeUndefined()
  })

  it("covers the releases inside it that minecraft-data lists without a definition, with their neighbours' ids", () => {
    // 1.9.1 and 1.14.2: a player on either is inside the range a refusal names, so must not be refused.
    expect(packetIdsFor(108)).toBe(packetIdsFor(107))
    expect(packetIdsFor(108)).toBe(packetIdsFor(109))
    expect(versionNamesOf(108)).toEqual(["1.9.1"])
    expect(packetIdsFor(485)).toBe(packetIdsFor(480))
    expect(packetIdsFor(485)).toBe(packetIdsFor(490))
    expect(versionNamesOf(485)).toEqual(["1.14.2"])
  })

  it("shares one object between versions with identical tables", () => {
    expect(packetIdsFor(763)).toBe(packetIdsFor(762))
    expect(packetIdsFor(754)).toBe(packetIdsFor(751))
    expect(packetIdsFor(764)).not.toBe(packetIdsFor(765))
  })

  it("agrees with the protocol notes", () => {
    for (const protocol of [5, 47, 340, 754, 764, 775]) {
      const login = packetIdsFor(protocol)!.login
      expect(login.clientbound.disconnect).toBe(0x00)
      expect(login.clientbound.encryptionRequest).toBe(0x01)
      expect(login.clientbound.loginSuccess).toBe(0x02)
      expect(login.serverbound.loginStart).toBe(0x00)
      expect(login.serverbound.encryptionResponse).toBe(0x01)
    }
    expect(packetIdsFor(5)!.login.clientbound.setCompression).toBeUndefined()
    expect(packetIdsFor(47)!.login.clientbound.setCompression).toBe(0x03)
    expect(packetIdsFor(340)!.login.clientbound.loginPluginRequest).toBeUndefined()
    expect(packetIdsFor(393)!.login.clientbound.loginPluginRequest).toBe(0x04)
    expect(packetIdsFor(393)!.login.serverbound.loginPluginResponse).toBe(0x02)
    expect(packetIdsFor(764)!.login.serverbound.loginAcknowledged).toBe(0x03)
    expect(packetIdsFor(766)!.login.clientbound.cookieRequest).toBe(0x05)
    expect(packetIdsFor(766)!.login.serverbound.cookieResponse).toBe(0x04)
    // Configuration disconnect: 0x01 in 1.20.2-1.20.4, 0x02 from 1.20.5.
    expect(packetIdsFor(763)!.configuration).toBeUndefined()
    expect(packetIdsFor(764)!.configuration!.clientbound.disconnect).toBe(0x01)
    expect(packetIdsFor(765)!.configuration!.clientbound.disconnect).toBe(0x01)
    expect(packetIdsFor(766)!.configuration!.clientbound.disconnect).toBe(0x02)
    expect(packetIdsFor(775)!.configuration!.clientbound.disconnect).toBe(0x02)
    expect(packetIdsFor(766)!.play.clientbound.transfer).toBeDefined()
    expect(packetIdsFor(765)!.play.clientbound.transfer).toBeUndefined()
    expect(packetIdsFor(758)!.play.clientbound.systemChat).toBeUndefined()
    expect(packetIdsFor(758)!.play.clientbound.legacyChat).toBeDefined()
    expect(packetIdsFor(759)!.play.clientbound.legacyChat).toBeUndefined()
  })
})
