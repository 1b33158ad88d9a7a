/** Login Start (read from the player, replayed or rewritten for the backend) and the login-state Disconnect. */
import { PacketReader } from "./PacketReader.js"
import { PacketWriter } from "./PacketWriter.js"
import { ProtocolError } from "./ProtocolError.js"
import { type Decoded, decoding } from "./result.js"
import { type TextComponent, textComponentJson } from "./text.js"

export const MAX_LOGIN_START_FRAME_BYTES = 4096
export const MAX_PLAYER_NAME_CHARS = 16

/** The chat-signing key a 1.19-1.19.2 client sends in Login Start (needed by modern forwarding v2/v3). */
export interface PlayerPublicKey {
  /** Expiry, epoch milliseconds. */
  readonly expiresAt: bigint
  /** X.509 SubjectPublicKeyInfo DER of the player's RSA key. */
  readonly key: Buffer
  /** Mojang's signature over the key. */
  readonly signature: Buffer
}

export interface LoginStart {
  readonly name: string
  /** The UUID the client sent (1.19.1+), in dashed form. */
  readonly uuid: string | undefined
  /** 1.19-1.19.2 only, when the client sent one. */
  readonly publicKey?: PlayerPublicKey
}

/** Bounds of the key fields (Velocity reads the signature with a 4096-byte cap; keys are about 300 bytes). */
const MAX_PUBLIC_KEY_BYTES = 512
const MAX_KEY_SIGNATURE_BYTES = 4096

/** Protocol numbers where the Login Start layout changed. */
const P_1_19 = 759
const P_1_19_1 = 760
const P_1_19_3 = 761
const P_1_20_2 = 764

/**
 * Decodes the Login Start body for the client's protocol version: name only up to 1.18.2; 1.19 adds optional
 * signature data; 1.19.1-1.19.2 optional signature data then optional UUID; 1.19.3-1.20.1 optional UUID;
 * 1.20.2+ a mandatory UUID.
 */
export const decodeLoginStartBody = (body: Buffer, protocolVersion: number): LoginStart => {
  const reader = new PacketReader(body)
  const name = reader.string(MAX_PLAYER_NAME_CHARS, "player name")
  if (name.length === 0) throw new ProtocolError({ reason: "empty player name" })
  let uuid: string | undefined
  let publicKey: PlayerPublicKey | undefined
  if (protocolVersion >= P_1_20_2) {
    uuid = reader.uuid()
  } else if (protocolVersion >= P_1_19_3) {
    if (reader.bool("has UUID")) uuid = reader.uuid()
  } else if (protocolVersion >= P_1_19) {
    if (reader.bool("has signature data")) {
      const expiresAt = reader.i64("key expiry")
      const key = reader.byteArray(MAX_PUBLIC_KEY_BYTES, "public key")
      const signature = reader.byteArray(MAX_KEY_SIGNATURE_BYTES, "key signature")
      publicKey = { expiresAt, key: Buffer.from(key), signature: Buffer.from(signature) }
    }
    if (protocolVersion >= P_1_19_1 && reader.remaining > 0 && reader.bool("has UUID")) uuid = reader.uuid()
  }
  return publicKey === undefined ? { name, uuid } : { name, uuid, publicKey }
}

/** `decodeLoginStartBody` with failures as values. */
export const readLoginStart = (body: Buffer, protocolVersion: number): Decoded<LoginStart> =>
  decoding("Login Start", () => decodeLoginStartBody(body, protocolVersion))

/**
 * The Login Start body Portal sends a backend for `name` and `uuid` (dashed) in the layout of `protocolVersion`:
 * 1.19-1.19.2 carry the player's key when given (else "no key"), 1.19.1-1.20.1 the optional UUID (always sent),
 * 1.20.2+ the UUID.
 */
export const encodeLoginStartBody = (input: {
  readonly name: string
  readonly uuid: string
  readonly protocolVersion: number
  readonly publicKey?: PlayerPublicKey | undefined
}): Buffer => {
  const writer = new PacketWriter().string(input.name)
  const pv = input.protocolVersion
  if (pv >= P_1_20_2) return writer.uuid(input.uuid).body()
  if (pv >= P_1_19_3) return writer.bool(true).uuid(input.uuid).body()
  if (pv >= P_1_19) {
    const key = input.publicKey
    if (key === undefined) writer.bool(false)
    else writer.bool(true).i64(key.expiresAt).byteArray(key.key).byteArray(key.signature)
    if (pv >= P_1_19_1) writer.bool(true).uuid(input.uuid)
  }
  return writer.body()
}

/** A login-state Disconnect (packet 0x00, JSON text in every version from 1.7). */
export const encodeLoginDisconnect = (reason: TextComponent): Buffer =>
  new PacketWriter().string(textComponentJson(reason)).frame(0x00)
