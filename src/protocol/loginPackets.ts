/**
 * Login-state packets of the packet modes, per protocol version (bodies only: frame them with `encodeFrame` and the
 * id from `packetIdsFor(version).login`). Layouts checked against minecraft-data 3.117 through minecraft-protocol's
 * serializers in test/protocol/loginPackets.test.ts. Login Start and the login Disconnect live in login.ts.
 */
import type { GameProfileProperty } from "./forwarding.js"
import { PacketReader } from "./PacketReader.js"
import { PacketWriter } from "./PacketWriter.js"
import { ProtocolError } from "./ProtocolError.js"
import { type Decoded, decoding } from "./result.js"
import { type TextComponent, textComponentJson } from "./text.js"
import { parseUuid } from "./uuid.js"
import { PV_1_16, PV_1_19, PV_1_19_3, PV_1_20_5, PV_1_21_2, PV_1_8 } from "./versions.js"

/** Bounds on fields read from peers (vanilla's where it has one). */
const MAX_SERVER_ID_CHARS = 20
const MAX_CRYPTO_BYTES = 256
const MAX_SIGNATURE_BYTES = 4096
const MAX_PLAYER_NAME_CHARS = 16
const MAX_PROPERTIES = 64
const MAX_PROPERTY_NAME_CHARS = 64
const MAX_PROPERTY_VALUE_CHARS = 32_767
const MAX_PROPERTY_SIGNATURE_CHARS = 1024
const MAX_CHANNEL_CHARS = 32_767
/** Vanilla's cap on login plugin payloads. */
export const MAX_LOGIN_PLUGIN_DATA_BYTES = 1_048_576

// --- Encryption Request (clientbound) ---------------------------------------------------------------------------

export interface EncryptionRequest {
  /** "" since 1.7 (the hash still takes it). */
  readonly serverId: string
  /** X.509 SubjectPublicKeyInfo DER of the server's RSA key. */
  readonly publicKey: Buffer
  readonly verifyToken: Buffer
  /** 1.20.5+: whether the client must authenticate with the session server (written only from 766). */
  readonly shouldAuthenticate: boolean
}

/** 1.7: i16-prefixed arrays; 1.8+: VarInt-prefixed; 1.20.5+: then `shouldAuthenticate`. */
export const encodeEncryptionRequestBody = (request: EncryptionRequest, protocolVersion: number): Buffer => {
  const writer = new PacketWriter().string(request.serverId)
  if (protocolVersion < PV_1_8) writer.shortByteArray(request.publicKey).shortByteArray(request.verifyToken)
  else writer.byteArray(request.publicKey).byteArray(request.verifyToken)
  if (protocolVersion >= PV_1_20_5) writer.bool(request.shouldAuthenticate)
  return writer.body()
}

export const decodeEncryptionRequestBody = (body: Buffer, protocolVersion: number): Decoded<EncryptionRequest> =>
  decoding("Encryption Request", () => {
    const reader = new PacketReader(body)
    const serverId = reader.string(MAX_SERVER_ID_CHARS, "server id")
    const array = (what: string) =>
      protocolVersion < PV_1_8 ? reader.shortByteArray(MAX_SIGNATURE_BYTES, what) : reader.byteArray(MAX_SIGNATURE_BYTES, what)
    const publicKey = array("public key")
    const verifyToken = array("verify token")
    const shouldAuthenticate = protocolVersion >= PV_1_20_5 ? reader.bool("shouldAuthenticate") : true
    reader.expectEnd("Encryption Request")
    return { serverId, publicKey, verifyToken, shouldAuthenticate }
  })

// --- Encryption Response (serverbound) --------------------------------------------------------------------------

export type EncryptionResponse =
  /** The usual form: both values RSA-encrypted with the server's public key. */
  | { readonly _tag: "Token"; readonly sharedSecret: Buffer; readonly verifyToken: Buffer }
  /**
   * 1.19-1.19.2 clients with a chat key send, instead of the encrypted token, a salt and their signature over
   * `verifyToken | salt (i64 BE)` made with the key of their Login Start (see `verifySignedVerifyToken`).
   */
  | { readonly _tag: "Signed"; readonly sharedSecret: Buffer; readonly salt: bigint; readonly signature: Buffer }

export const decodeEncryptionResponseBody = (body: Buffer, protocolVersion: number): Decoded<EncryptionResponse> =>
  decoding("Encryption Response", () => {
    const reader = new PacketReader(body)
    let response: EncryptionResponse
    if (protocolVersion < PV_1_8) {
      const sharedSecret = reader.shortByteArray(MAX_CRYPTO_BYTES, "shared secret")
      response = { _tag: "Token", sharedSecret, verifyToken: reader.shortByteArray(MAX_CRYPTO_BYTES, "verify token") }
    } else {
      const sharedSecret = reader.byteArray(MAX_CRYPTO_BYTES, "shared secret")
      if (protocolVersion >= PV_1_19 && protocolVersion < PV_1_19_3 && !reader.bool("hasVerifyToken")) {
        const salt = reader.i64("salt")
        response = { _tag: "Signed", sharedSecret, salt, signature: reader.byteArray(MAX_SIGNATURE_BYTES, "signature") }
      } else {
        response = { _tag: "Token", sharedSecret, verifyToken: reader.byteArray(MAX_CRYPTO_BYTES, "verify token") }
      }
    }
    reader.expectEnd("Encryption Response")
    return response
  })

/** The client's side (tests, a client written on this layer): the usual form, in the layout of any version. */
export const encodeEncryptionResponseBody = (
  response: { readonly sharedSecret: Buffer; readonly verifyToken: Buffer },
  protocolVersion: number
): Buffer => {
  const writer = new PacketWriter()
  if (protocolVersion < PV_1_8) return writer.shortByteArray(response.sharedSecret).shortByteArray(response.verifyToken).body()
  writer.byteArray(response.sharedSecret)
  if (protocolVersion >= PV_1_19 && protocolVersion < PV_1_19_3) writer.bool(true)
  return writer.byteArray(response.verifyToken).body()
}

/** The signed form, which only 1.19-1.19.2 have. */
export const encodeSignedEncryptionResponseBody = (response: {
  readonly sharedSecret: Buffer
  readonly salt: bigint
  readonly signature: Buffer
}): Buffer => new PacketWriter().byteArray(response.sharedSecret).bool(false).i64(response.salt).byteArray(response.signature).body()

// --- Login Success (clientbound) --------------------------------------------------------------------------------

export interface LoginSuccess {
  /** Dashed form. */
  readonly uuid: string
  readonly name: string
  /** Written from 1.19 (759); earlier versions have no properties in Login Success. */
  readonly properties: ReadonlyArray<GameProfileProperty>
  /** Written only in 1.20.5-1.21.1 (766-767). */
  readonly strictErrorHandling: boolean
}

const hasStrictErrorHandling = (pv: number) => pv >= PV_1_20_5 && pv < PV_1_21_2

/** UUID as a dashed string up to 1.15, binary from 1.16; properties from 1.19; strictErrorHandling in 766-767. */
export const encodeLoginSuccessBody = (success: LoginSuccess, protocolVersion: number): Buffer => {
  const writer = new PacketWriter()
  if (protocolVersion < PV_1_16) writer.string(success.uuid)
  else writer.uuid(success.uuid)
  writer.string(success.name)
  if (protocolVersion >= PV_1_19) {
    writer.varInt(success.properties.length)
    for (const property of success.properties) {
      writer.string(property.name).string(property.value)
      // As Velocity's writeProperties: an empty signature is "no signature".
      if (property.signature !== undefined && property.signature !== "") writer.bool(true).string(property.signature)
      else writer.bool(false)
    }
  }
  if (hasStrictErrorHandling(protocolVersion)) writer.bool(success.strictErrorHandling)
  return writer.body()
}

export const decodeLoginSuccessBody = (body: Buffer, protocolVersion: number): Decoded<LoginSuccess> =>
  decoding("Login Success", () => {
    const reader = new PacketReader(body)
    let uuid: string
    if (protocolVersion < PV_1_16) {
      const parsed = parseUuid(reader.string(36, "UUID"))
      if (parsed._tag === "Invalid") throw new ProtocolError({ reason: parsed.reason })
      uuid = parsed.uuid
    } else {
      uuid = reader.uuid()
    }
    const name = reader.string(MAX_PLAYER_NAME_CHARS, "player name")
    const properties: Array<GameProfileProperty> = []
    if (protocolVersion >= PV_1_19) {
      const count = reader.varInt("property count")
      if (count < 0 || count > MAX_PROPERTIES) throw new ProtocolError({ reason: `${count} properties` })
      for (let i = 0; i < count; i++) {
        const propertyName = reader.string(MAX_PROPERTY_NAME_CHARS, "property name")
        const value = reader.string(MAX_PROPERTY_VALUE_CHARS, "property value")
        if (reader.bool("has signature")) {
          properties.push({ name: propertyName, value, signature: reader.string(MAX_PROPERTY_SIGNATURE_CHARS, "property signature") })
        } else {
          properties.push({ name: propertyName, value })
        }
      }
    }
    const strictErrorHandling = hasStrictErrorHandling(protocolVersion) ? reader.bool("strictErrorHandling") : false
    reader.expectEnd("Login Success")
    return { uuid, name, properties, strictErrorHandling }
  })

// --- Set Compression (clientbound, 1.8+) ------------------------------------------------------------------------

export const encodeSetCompressionBody = (threshold: number): Buffer => new PacketWriter().varInt(threshold).body()

/** The threshold; negative means "compression off" to vanilla. */
export const decodeSetCompressionBody = (body: Buffer): Decoded<number> =>
  decoding("Set Compression", () => {
    const reader = new PacketReader(body)
    const threshold = reader.varInt("threshold")
    reader.expectEnd("Set Compression")
    return threshold
  })

// --- Login Plugin Request / Response (1.13+) --------------------------------------------------------------------

export interface LoginPluginRequest {
  readonly messageId: number
  readonly channel: string
  /** A view of the body. */
  readonly data: Buffer
}

export const encodeLoginPluginRequestBody = (request: LoginPluginRequest): Buffer =>
  new PacketWriter().varInt(request.messageId).string(request.channel).bytes(request.data).body()

export const decodeLoginPluginRequestBody = (body: Buffer): Decoded<LoginPluginRequest> =>
  decoding("Login Plugin Request", () => {
    const reader = new PacketReader(body)
    const messageId = reader.varInt("message id")
    const channel = reader.string(MAX_CHANNEL_CHARS, "channel")
    if (reader.remaining > MAX_LOGIN_PLUGIN_DATA_BYTES) throw new ProtocolError({ reason: `payload of ${reader.remaining} bytes` })
    return { messageId, channel, data: reader.rest() }
  })

export interface LoginPluginResponse {
  readonly messageId: number
  /** undefined: the client did not understand the request ("successful = false"). */
  readonly data: Buffer | undefined
}

export const encodeLoginPluginResponseBody = (response: LoginPluginResponse): Buffer => {
  const writer = new PacketWriter().varInt(response.messageId)
  return response.data === undefined ? writer.bool(false).body() : writer.bool(true).bytes(response.data).body()
}

export const decodeLoginPluginResponseBody = (body: Buffer): Decoded<LoginPluginResponse> =>
  decoding("Login Plugin Response", () => {
    const reader = new PacketReader(body)
    const messageId = reader.varInt("message id")
    if (!reader.bool("successful")) {
      reader.expectEnd("an unsuccessful Login Plugin Response")
      return { messageId, data: undefined }
    }
    if (reader.remaining > MAX_LOGIN_PLUGIN_DATA_BYTES) throw new ProtocolError({ reason: `payload of ${reader.remaining} bytes` })
    return { messageId, data: reader.rest() }
  })

// --- Disconnect (login: JSON in every version) ------------------------------------------------------------------

export const encodeLoginDisconnectBody = (reason: TextComponent): Buffer => new PacketWriter().string(textComponentJson(reason)).body()

/** The reason as parsed JSON (or the raw string when it is not JSON). */
export const decodeLoginDisconnectBody = (body: Buffer): Decoded<unknown> =>
  decoding("Disconnect", () => {
    const reader = new PacketReader(body)
    const json = reader.string(262_144, "reason")
    reader.expectEnd("Disconnect")
    try {
      return JSON.parse(json) as unknown
    } catch {
      return json
    }
  })

/** Bodies of packets without fields: Login Acknowledged, Start Configuration, Acknowledge Configuration, Finish Configuration. */
export const EMPTY_BODY: Buffer = Buffer.alloc(0)
