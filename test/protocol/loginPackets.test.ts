/** Login-state codecs, encoded by Portal and read by minecraft-protocol, and the reverse, across versions. */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { encodeLoginStartBody, readLoginStart } from "../../src/protocol/login.js"
import {
  decodeEncryptionRequestBody,
  decodeEncryptionResponseBody,
  decodeLoginDisconnectBody,
  decodeLoginPluginRequestBody,
  decodeLoginPluginResponseBody,
  decodeLoginSuccessBody,
  decodeSetCompressionBody,
  encodeEncryptionRequestBody,
  encodeEncryptionResponseBody,
  encodeLoginDisconnectBody,
  encodeLoginPluginRequestBody,
  encodeLoginPluginResponseBody,
  encodeLoginSuccessBody,
  encodeSetCompressionBody,
  encodeSignedEncryptionResponseBody,
  type LoginSuccess
} from "../../src/protocol/loginPackets.js"
import { PacketWriter } from "../../src/protocol/PacketWriter.js"
import { LOGIN_TEST_VERSIONS } from "./versions.js"
import { idsOf, mcDecode, mcEncode, mcLong } from "./mcPeer.js"

const VERSIONS = LOGIN_TEST_VERSIONS

const ok = <A>(decoded: { _tag: "Ok"; value: A } | { _tag: "Invalid"; reason: string }): A => {
  if (decoded._tag === "Invalid") throw new Error(decoded.reason)
  return decoded.value
}

const uuid = "069a79f4-44e9-4726-a5be-fca90e38aaf5"
const properties = [
  { name: "textures", value: "eyJ0ZXh0dXJlcyI6e319", signature: "c2lnbmF0dXJl" },
  { name: "unsigned", value: "v" }
]

describe.each(VERSIONS)("login packets, protocol %i", (pv) => {
  const ids = idsOf(pv).login
  const publicKey = randomBytes(162)
  const verifyToken = randomBytes(4)
  const sharedSecret = randomBytes(128)

  it("Encryption Request: Portal writes, minecraft-protocol reads, and back", () => {
    const request = { serverId: "", publicKey, verifyToken, shouldAuthenticate: true }
    const theirs = mcDecode("login", "clientbound", pv, ids.clientbound.encryptionRequest, encodeEncryptionRequestBody(request, pv))
    expect(theirs.name).toBe("encryption_begin")
    expect(theirs.params).toEqual({ serverId: "", publicKey, verifyToken, ...(pv >= 766 ? { shouldAuthenticate: true } : {}) })
    const { body } = mcEncode("login", "clientbound", pv, "encryption_begin", { ...theirs.params })
    expect(ok(decodeEncryptionRequestBody(body, pv))).toEqual(request)
  })

  it("Encryption Response: minecraft-protocol writes, Portal reads, and back", () => {
    const params = pv >= 759 && pv < 761 ? { sharedSecret, hasVerifyToken: true, crypto: { verifyToken } } : { sharedSecret, verifyToken }
    const { id, body } = mcEncode("login", "serverbound", pv, "encryption_begin", params)
    expect(id).toBe(ids.serverbound.encryptionResponse)
    expect(ok(decodeEncryptionResponseBody(body, pv))).toEqual({ _tag: "Token", sharedSecret, verifyToken })
    expect(encodeEncryptionResponseBody({ sharedSecret, verifyToken }, pv)).toEqual(body)
  })

  if (pv >= 759 && pv < 761) {
    it("Encryption Response with a signed verify token (1.19-1.19.2)", () => {
      const signature = randomBytes(256)
      const salt = -1234567890123n
      const { body } = mcEncode("login", "serverbound", pv, "encryption_begin", {
        sharedSecret,
        hasVerifyToken: false,
        crypto: { salt, messageSignature: signature }
      })
      expect(ok(decodeEncryptionResponseBody(body, pv))).toEqual({ _tag: "Signed", sharedSecret, salt, signature })
      expect(encodeSignedEncryptionResponseBody({ sharedSecret, salt, signature })).toEqual(body)
    })
  }

  it("Login Success: Portal writes, minecraft-protocol reads, and back", () => {
    const success: LoginSuccess = { uuid, name: "Notch", properties, strictErrorHandling: true }
    const theirs = mcDecode("login", "clientbound", pv, ids.clientbound.loginSuccess, encodeLoginSuccessBody(success, pv))
    expect(theirs.name).toBe("success")
    const expected: Record<string, unknown> = { uuid, username: "Notch" }
    if (pv >= 759) expected.properties = properties
    if (pv >= 766 && pv < 768) expected.strictErrorHandling = true
    expect(theirs.params).toEqual(expected)
    const { body } = mcEncode("login", "clientbound", pv, "success", expected)
    const back = ok(decodeLoginSuccessBody(body, pv))
    expect(back).toEqual({
      uuid,
      name: "Notch",
      properties: pv >= 759 ? properties : [],
      strictErrorHandling: pv >= 766 && pv < 768
    })
  })

  it("Login Start: Portal writes (for the backend), minecraft-protocol reads, and back", () => {
    const key = { expiresAt: 1_700_000_000_000n, key: randomBytes(294), signature: randomBytes(512) }
    const body = encodeLoginStartBody({ name: "Steve", uuid, protocolVersion: pv, publicKey: pv >= 759 && pv < 761 ? key : undefined })
    const theirs = mcDecode("login", "serverbound", pv, ids.serverbound.loginStart, body)
    expect(theirs.name).toBe("login_start")
    expect(theirs.params.username).toBe("Steve")
    if (pv >= 760) expect(theirs.params.playerUUID).toBe(uuid)
    if (pv >= 759 && pv < 761) {
      const signature = theirs.params.signature as { timestamp: unknown; publicKey: Buffer; signature: Buffer }
      expect({ ...signature, timestamp: mcLong(signature.timestamp) }).toEqual({ timestamp: key.expiresAt, publicKey: key.key, signature: key.signature })
    }
    const { body: mcBody } = mcEncode("login", "serverbound", pv, "login_start", theirs.params)
    const start = ok(readLoginStart(mcBody, pv))
    expect(start.name).toBe("Steve")
    expect(start.uuid).toBe(pv >= 760 ? uuid : undefined)
    expect(start.publicKey).toEqual(pv >= 759 && pv < 761 ? key : undefined)
  })

  if (pv >= 47) {
    it("Set Compression", () => {
      const theirs = mcDecode("login", "clientbound", pv, ids.clientbound.setCompression!, encodeSetCompressionBody(256))
      expect(theirs).toEqual({ name: "compress", params: { threshold: 256 } })
      expect(ok(decodeSetCompressionBody(mcEncode("login", "clientbound", pv, "compress", { threshold: -1 }).body))).toBe(-1)
    })
  }

  if (pv >= 393) {
    it("Login Plugin Request and Response", () => {
      const data = Buffer.from([1])
      const request = { messageId: 300, channel: "velocity:player_info", data }
      const theirs = mcDecode("login", "clientbound", pv, ids.clientbound.loginPluginRequest!, encodeLoginPluginRequestBody(request))
      expect(theirs).toEqual({ name: "login_plugin_request", params: request })
      expect(ok(decodeLoginPluginRequestBody(mcEncode("login", "clientbound", pv, "login_plugin_request", request).body))).toEqual(request)

      for (const response of [{ messageId: 300, data: randomBytes(40) }, { messageId: 7, data: undefined }]) {
        const decoded = mcDecode("login", "serverbound", pv, ids.serverbound.loginPluginResponse!, encodeLoginPluginResponseBody(response))
        expect(decoded).toEqual({ name: "login_plugin_response", params: response })
        const { body } = mcEncode("login", "serverbound", pv, "login_plugin_response", response)
        expect(ok(decodeLoginPluginResponseBody(body))).toEqual(response)
      }
    })
  }

  it("Disconnect (JSON text in login, in every version)", () => {
    const reason = { text: "Bye", color: "red" }
    const theirs = mcDecode("login", "clientbound", pv, ids.clientbound.disconnect, encodeLoginDisconnectBody(reason))
    expect(theirs.name).toBe("disconnect")
    expect(JSON.parse(theirs.params.reason as string)).toEqual(reason)
    expect(ok(decodeLoginDisconnectBody(mcEncode("login", "clientbound", pv, "disconnect", { reason: '{"text":"x"}' }).body))).toEqual({ text: "x" })
  })
})

describe("bad login packets are Invalid", () => {
  it("truncation anywhere, trailing bytes, oversized fields", () => {
    const success = encodeLoginSuccessBody({ uuid, name: "Notch", properties, strictErrorHandling: false }, 767)
    for (let cut = 0; cut < success.length; cut++) expect(decodeLoginSuccessBody(success.subarray(0, cut), 767)._tag).toBe("Invalid")
    expect(decodeLoginSuccessBody(Buffer.concat([success, Buffer.from([0])]), 767)._tag).toBe("Invalid")
    expect(decodeLoginSuccessBody(new PacketWriter().string("not-a-uuid").string("x").body(), 340)).toMatchObject({
      _tag: "Invalid",
      reason: expect.stringMatching(/not a UUID/)
    })
    const response = encodeEncryptionResponseBody({ sharedSecret: randomBytes(128), verifyToken: randomBytes(4) }, 769)
    for (let cut = 0; cut < response.length; cut++) expect(decodeEncryptionResponseBody(response.subarray(0, cut), 769)._tag).toBe("Invalid")
    expect(decodeEncryptionResponseBody(new PacketWriter().byteArray(randomBytes(300)).byteArray(Buffer.alloc(4)).body(), 769)).toMatchObject({
      _tag: "Invalid",
      reason: expect.stringMatching(/shared secret of 300 bytes/)
    })
    expect(decodeEncryptionResponseBody(new PacketWriter().i16(-1).body(), 5)._tag).toBe("Invalid")
    expect(decodeSetCompressionBody(Buffer.from([0x80]))._tag).toBe("Invalid")
    expect(decodeLoginPluginResponseBody(Buffer.from([1, 0, 9]))._tag).toBe("Invalid")
    expect(decodeLoginPluginRequestBody(Buffer.from([0x80]))._tag).toBe("Invalid")
    expect(readLoginStart(Buffer.from([0]), 769)._tag).toBe("Invalid")
  })
})
