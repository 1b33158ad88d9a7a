/**
 * Configuration- and play-state packets Portal reads or writes, per protocol version (bodies only: frame them with
 * `encodeFrame` and the id from `packetIdsFor(version)`). Layouts checked against minecraft-data 3.117 through
 * minecraft-protocol's serializers in test/protocol/gamePackets.test.ts.
 */
import { PacketReader } from "./PacketReader.js"
import { PacketWriter } from "./PacketWriter.js"
import { ProtocolError } from "./ProtocolError.js"
import { type Decoded, decoding } from "./result.js"
import { encodeTextField, readTextField, type TextComponent } from "./text.js"
import { NIL_UUID } from "./uuid.js"
import { PV_1_12_2, PV_1_13, PV_1_16, PV_1_19, PV_1_19_1, PV_1_8 } from "./versions.js"

// --- Disconnect (configuration 1.20.2+, play) -------------------------------------------------------------------

/** JSON text before 1.20.3, network NBT from 765 (the login-state Disconnect is JSON always: see loginPackets.ts). */
export const encodeDisconnectBody = (reason: TextComponent, protocolVersion: number): Buffer => encodeTextField(reason, protocolVersion)

/** The reason: parsed JSON (or the raw string) before 765, decoded NBT from 765. */
export const decodeDisconnectBody = (body: Buffer, protocolVersion: number): Decoded<unknown> =>
  decoding("Disconnect", () => {
    const reader = new PacketReader(body)
    const reason = readTextField(reader, protocolVersion)
    reader.expectEnd("Disconnect")
    return reason
  })

// --- Keep Alive (both directions; configuration and play) -------------------------------------------------------

/** i32 on 1.7, VarInt up to 1.12.1, i64 from 1.12.2. Ids from the older versions are taken as 32-bit. */
export const encodeKeepAliveBody = (id: bigint, protocolVersion: number): Buffer => {
  if (protocolVersion >= PV_1_12_2) return new PacketWriter().i64(BigInt.asIntN(64, id)).body()
  const id32 = Number(BigInt.asIntN(32, id))
  return protocolVersion < PV_1_8 ? new PacketWriter().i32(id32).body() : new PacketWriter().varInt(id32).body()
}

export const decodeKeepAliveBody = (body: Buffer, protocolVersion: number): Decoded<bigint> =>
  decoding("Keep Alive", () => {
    const reader = new PacketReader(body)
    const id =
      protocolVersion >= PV_1_12_2
        ? reader.i64("keep-alive id")
        : BigInt(protocolVersion < PV_1_8 ? reader.i32("keep-alive id") : reader.varInt("keep-alive id"))
    reader.expectEnd("Keep Alive")
    return id
  })

// --- Plugin Message (both directions; configuration and play) ---------------------------------------------------

/** Channel names: 20 characters before 1.13 (`MC|Brand`), namespaced identifiers after (`minecraft:brand`). */
const maxChannelChars = (pv: number) => (pv < PV_1_13 ? 20 : 32_767)
/** Vanilla's payload caps: 1 MiB towards the client, 32767 bytes towards the server. */
export const MAX_CLIENTBOUND_PLUGIN_DATA_BYTES = 1_048_576
export const MAX_SERVERBOUND_PLUGIN_DATA_BYTES = 32_767

export interface PluginMessage {
  readonly channel: string
  /** A view of the body. */
  readonly data: Buffer
}

/** 1.7 prefixes the data with an i16 length; later versions let it run to the end of the packet. */
export const encodePluginMessageBody = (message: PluginMessage, protocolVersion: number): Buffer => {
  const writer = new PacketWriter().string(message.channel)
  return (protocolVersion < PV_1_8 ? writer.shortByteArray(message.data) : writer.bytes(message.data)).body()
}

export const decodePluginMessageBody = (
  body: Buffer,
  protocolVersion: number,
  maxDataBytes = MAX_CLIENTBOUND_PLUGIN_DATA_BYTES
): Decoded<PluginMessage> =>
  decoding("Plugin Message", () => {
    const reader = new PacketReader(body)
    const channel = reader.string(maxChannelChars(protocolVersion), "channel")
    if (protocolVersion < PV_1_8) {
      const data = reader.shortByteArray(maxDataBytes, "data")
      reader.expectEnd("Plugin Message")
      return { channel, data }
    }
    if (reader.remaining > maxDataBytes) throw new ProtocolError({ reason: `payload of ${reader.remaining} bytes (at most ${maxDataBytes})` })
    return { channel, data: reader.rest() }
  })

// --- A message to the player (play) -----------------------------------------------------------------------------

export interface ChatToPlayer {
  /** Which packet of `packetIdsFor(version).play.clientbound` carries it. */
  readonly packet: "legacyChat" | "systemChat"
  readonly body: Buffer
}

/**
 * A system message (or action bar text) for the player, as each version takes it:
 * 1.7 Chat `JSON`; 1.8-1.15 Chat `JSON | i8 position` (1 system, 2 action bar); 1.16-1.18.2 adds the sender UUID
 * (nil); 1.19 System Chat `JSON | VarInt type` (1 system, 2 action bar); 1.19.1+ `text | bool overlay`, the text
 * in NBT from 1.20.3.
 */
export const encodeChatToPlayer = (message: TextComponent, protocolVersion: number, actionBar = false): ChatToPlayer => {
  const text = encodeTextField(message, protocolVersion)
  if (protocolVersion >= PV_1_19_1) return { packet: "systemChat", body: Buffer.concat([text, Buffer.from([actionBar ? 1 : 0])]) }
  if (protocolVersion >= PV_1_19) return { packet: "systemChat", body: new PacketWriter().bytes(text).varInt(actionBar ? 2 : 1).body() }
  if (protocolVersion < PV_1_8) return { packet: "legacyChat", body: text }
  const writer = new PacketWriter().bytes(text).i8(actionBar ? 2 : 1)
  if (protocolVersion >= PV_1_16) writer.uuid(NIL_UUID)
  return { packet: "legacyChat", body: writer.body() }
}

// --- Transfer (1.20.5+, configuration and play) -----------------------------------------------------------------

export const encodeTransferBody = (host: string, port: number): Buffer => new PacketWriter().string(host).varInt(port).body()
