/** The serverbound handshake (state handshaking, packet 0x00) and the address normalisation used for routing. */
import { PacketReader } from "./PacketReader.js"
import { PacketWriter } from "./PacketWriter.js"
import { ProtocolError } from "./ProtocolError.js"

export const NEXT_STATE_STATUS = 1
export const NEXT_STATE_LOGIN = 2
/** Transfer (1.20.5+, protocol 766): a login arriving from another server's transfer packet. */
export const NEXT_STATE_TRANSFER = 3

/** Room for the markers that Forge, Floodgate and TCPShield append to the 255 characters vanilla allows. */
export const MAX_HANDSHAKE_ADDRESS_CHARS = 2048
/** A handshake frame can never be larger than this; anything larger is not a handshake. */
export const MAX_HANDSHAKE_FRAME_BYTES = 1 + 5 + 3 + MAX_HANDSHAKE_ADDRESS_CHARS * 3 + 2 + 5

export interface Handshake {
  readonly protocolVersion: number
  /** The address exactly as the client sent it, markers included. */
  readonly address: string
  readonly port: number
  readonly nextState: number
}

export const decodeHandshakeBody = (body: Buffer): Handshake => {
  const reader = new PacketReader(body)
  const protocolVersion = reader.varInt("protocol version")
  const address = reader.string(MAX_HANDSHAKE_ADDRESS_CHARS, "server address")
  const port = reader.u16("server port")
  const nextState = reader.varInt("next state")
  if (nextState !== NEXT_STATE_STATUS && nextState !== NEXT_STATE_LOGIN && nextState !== NEXT_STATE_TRANSFER) {
    throw new ProtocolError({ reason: `unknown next state ${nextState}` })
  }
  if (reader.remaining !== 0) throw new ProtocolError({ reason: `${reader.remaining} unexpected bytes after the handshake` })
  return { protocolVersion, address, port, nextState }
}

export const encodeHandshake = (handshake: Handshake): Buffer =>
  new PacketWriter()
    .varInt(handshake.protocolVersion)
    .string(handshake.address)
    .u16(handshake.port)
    .varInt(handshake.nextState)
    .frame(0x00)

export interface SplitAddress {
  /** What routing uses: lower-case, without markers, without a trailing dot. */
  readonly host: string
  /** The host as the client wrote it (case kept, markers removed). */
  readonly rawHost: string
  /** Everything the client appended after the host (Forge `\0FML2\0`, Floodgate, TCPShield `///...`), kept for the backend. */
  readonly suffix: string
}

/**
 * Splits a handshake address into the routable host and the markers after it: cut at the first `\0` (Forge,
 * Floodgate), cut at `///` (TCPShield), strip one trailing `.` (SRV targets), lower-case.
 */
export const splitAddress = (address: string): SplitAddress => {
  let cut = address.length
  const nul = address.indexOf("\0")
  if (nul >= 0) cut = nul
  const shield = address.indexOf("///")
  if (shield >= 0 && shield < cut) cut = shield
  const rawHost = address.slice(0, cut)
  const suffix = address.slice(cut)
  const host = rawHost.replace(/\.$/, "").toLowerCase()
  return { host, rawHost, suffix }
}
