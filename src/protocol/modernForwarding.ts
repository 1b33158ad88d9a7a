/**
 * Velocity's modern player-info forwarding, as a backend (Paper, FabricProxy-Lite, proxy-compatible-forge) expects
 * it: the backend sends a Login Plugin Request on `velocity:player_info` whose data is one byte, the highest version
 * it supports (absent: 1); the proxy answers with a Login Plugin Response of the same message id, successful, whose
 * data is `HMAC-SHA256(secret, payload) || payload`.
 *
 * Checked against Velocity's source (PaperMC/Velocity, proxy/.../connection/PlayerDataForwarding.java
 * `createForwardingData` and `findForwardingVersion`, backend/LoginSessionHandler.java `handle(LoginPluginMessagePacket)`,
 * protocol/ProtocolUtils.java `writeProperties` / `writePlayerKey` / `writeUuid`, and
 * backend/VelocityServerConnection.java `getPlayerRemoteAddressAsString`):
 * - the requested version is read only when the data is exactly one byte (Java's signed `readByte`), else 1;
 * - payload: VarInt version | String address | UUID (two i64 BE) | String name | VarInt n properties, each
 *   `String name | String value | Bool hasSignature [String signature]`, where an empty signature counts as none;
 * - versions 2 and 3 then append the player's key: `i64 expiry (epoch ms) | VarInt-prefixed key DER |
 *   VarInt-prefixed key signature`, and version 3 `Bool hasHolder [UUID holder]` (the profile the key belongs to);
 * - version choice: min(requested, 4); above 1, a 1.19.3+ client gets 4 when 4 is allowed and 1 otherwise; an older
 *   client with a 1.19 key (revision 1) gets 2, with a 1.19.1-1.19.2 key (revision 2) 3 when allowed and else 1;
 *   without a key, 1;
 * - the address is the player's IP without an IPv6 scope (`%eth0`);
 * - the HMAC covers exactly the payload bytes and comes first.
 * Version 4 ("lazy session") has the layout of version 1: the chat session arrives later, in play.
 */
import { createHmac } from "node:crypto"
import type { GameProfileProperty } from "./forwarding.js"
import type { PlayerPublicKey } from "./login.js"
import { PacketWriter } from "./PacketWriter.js"
import { type Invalid, invalid } from "./result.js"
import { uuidToBytes } from "./uuid.js"
import { PV_1_13, PV_1_19, PV_1_19_1, PV_1_19_3 } from "./versions.js"

export const MODERN_FORWARDING_CHANNEL = "velocity:player_info"
export const MODERN_DEFAULT = 1
export const MODERN_WITH_KEY = 2
export const MODERN_WITH_KEY_V2 = 3
export const MODERN_LAZY_SESSION = 4
export const MODERN_MAX_VERSION = MODERN_LAZY_SESSION
/** Modern forwarding rides on Login Plugin Request, which 1.13 introduced: older clients cannot use it. */
export const MODERN_FORWARDING_MIN_PROTOCOL = PV_1_13

/** The version the backend asks for: the request's single data byte (signed, as Java reads it), else 1. */
export const requestedForwardingVersion = (data: Buffer): number => (data.length === 1 ? data.readInt8(0) : MODERN_DEFAULT)

/** Which kind of chat key a client of this version sends in Login Start: 1 for 1.19, 2 for 1.19.1-1.19.2, none else. */
export const keyRevisionOf = (protocolVersion: number): 1 | 2 | undefined =>
  protocolVersion === PV_1_19 ? 1 : protocolVersion >= PV_1_19_1 && protocolVersion < PV_1_19_3 ? 2 : undefined

/** Velocity's `findForwardingVersion`: the highest version the backend allows that Portal can fill. */
export const chooseForwardingVersion = (requested: number, protocolVersion: number, hasKey: boolean): number => {
  const allowed = Math.min(requested, MODERN_MAX_VERSION)
  if (allowed <= MODERN_DEFAULT) return MODERN_DEFAULT
  if (protocolVersion >= PV_1_19_3) return allowed >= MODERN_LAZY_SESSION ? MODERN_LAZY_SESSION : MODERN_DEFAULT
  if (!hasKey) return MODERN_DEFAULT
  const revision = keyRevisionOf(protocolVersion)
  if (revision === 1) return MODERN_WITH_KEY
  if (revision === 2) return allowed >= MODERN_WITH_KEY_V2 ? MODERN_WITH_KEY_V2 : MODERN_DEFAULT
  return MODERN_DEFAULT
}

export interface ModernForwardingInput {
  /** The forwarding secret, as bytes (the UTF-8 of the secret file's text) or text. */
  readonly secret: Buffer | string
  /** The data of the backend's `velocity:player_info` request. */
  readonly requestData: Buffer
  /** The player's client protocol version. */
  readonly protocolVersion: number
  /** The player's IP address as text. */
  readonly clientIp: string
  /** Dashed or undashed. */
  readonly uuid: string
  readonly name: string
  readonly properties: ReadonlyArray<GameProfileProperty>
  /** The chat key of a 1.19-1.19.2 player's Login Start, when there was one. */
  readonly publicKey?: PlayerPublicKey | undefined
  /** For version 3: the UUID the key belongs to (the UUID of that Login Start); absent writes "no holder". */
  readonly keyHolder?: string | undefined
}

export type ModernForwardingResponse =
  | {
      readonly _tag: "Forwarding"
      /** The version written (for logs and tests). */
      readonly version: number
      /** The Login Plugin Response data: HMAC || payload. */
      readonly data: Buffer
    }
  | Invalid

export const encodeModernForwardingResponse = (input: ModernForwardingInput): ModernForwardingResponse => {
  const uuid = uuidToBytes(input.uuid)
  if (uuid._tag === "Invalid") return uuid
  let holder: Buffer | undefined
  if (input.keyHolder !== undefined) {
    const parsed = uuidToBytes(input.keyHolder)
    if (parsed._tag === "Invalid") return invalid(`key holder: ${parsed.reason}`)
    holder = parsed.bytes
  }
  const version = chooseForwardingVersion(
    requestedForwardingVersion(input.requestData),
    input.protocolVersion,
    input.publicKey !== undefined
  )
  const writer = new PacketWriter()
    .varInt(version)
    .string(input.clientIp.replace(/%.*$/, ""))
    .bytes(uuid.bytes)
    .string(input.name)
    .varInt(input.properties.length)
  for (const property of input.properties) {
    writer.string(property.name).string(property.value)
    if (property.signature !== undefined && property.signature !== "") writer.bool(true).string(property.signature)
    else writer.bool(false)
  }
  const key = input.publicKey
  if (key !== undefined && (version === MODERN_WITH_KEY || version === MODERN_WITH_KEY_V2)) {
    writer.i64(key.expiresAt).byteArray(key.key).byteArray(key.signature)
    if (version === MODERN_WITH_KEY_V2) {
      if (holder === undefined) writer.bool(false)
      else writer.bool(true).bytes(holder)
    }
  }
  const payload = writer.body()
  const mac = createHmac("sha256", typeof input.secret === "string" ? Buffer.from(input.secret, "utf8") : input.secret)
    .update(payload)
    .digest()
  return { _tag: "Forwarding", version, data: Buffer.concat([mac, payload]) }
}
