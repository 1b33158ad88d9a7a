/** Login state packets the raw modes need: Login Start (read, then replayed) and Disconnect. */
import { PacketReader } from "./PacketReader.js"
import { PacketWriter } from "./PacketWriter.js"
import { ProtocolError } from "./ProtocolError.js"
import { type TextComponent, textComponentJson } from "./text.js"

export const MAX_LOGIN_START_FRAME_BYTES = 4096
export const MAX_PLAYER_NAME_CHARS = 16

export interface LoginStart {
  readonly name: string
  /** The UUID the client sent (1.19.1+), in dashed form. */
  readonly uuid: string | undefined
}

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
  if (protocolVersion >= P_1_20_2) {
    uuid = reader.uuid()
  } else if (protocolVersion >= P_1_19_3) {
    if (reader.bool("has UUID")) uuid = reader.uuid()
  } else if (protocolVersion >= P_1_19) {
    if (reader.bool("has signature data")) {
      reader.i64("key expiry")
      reader.bytes(reader.varInt("public key length"), "public key")
      reader.bytes(reader.varInt("signature length"), "key signature")
    }
    if (protocolVersion >= P_1_19_1 && reader.remaining > 0 && reader.bool("has UUID")) uuid = reader.uuid()
  }
  return { name, uuid }
}

/** A login-state Disconnect (packet 0x00, JSON text in every version from 1.7). */
export const encodeLoginDisconnect = (reason: TextComponent): Buffer =>
  new PacketWriter().string(textComponentJson(reason)).frame(0x00)
