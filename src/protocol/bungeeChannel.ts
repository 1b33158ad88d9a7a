/**
 * BungeeCord's plugin channel (`BungeeCord` before 1.13, `bungeecord:main` from 1.13): backends' plugins ask the
 * proxy for player counts, lists, addresses and so on. Payloads are Java DataOutput: writeUTF (u16 byte length +
 * modified UTF-8), writeShort, writeInt, raw bytes. The requests are read and the answers written exactly as
 * BungeeCord does in `DownstreamBridge.handle(PluginMessage)` (SpigotMC/BungeeCord,
 * proxy/src/main/java/net/md_5/bungee/connection/DownstreamBridge.java):
 *
 * | subchannel      | request after the subchannel            | answer (to the asking server)                        |
 * | --------------- | --------------------------------------- | ---------------------------------------------------- |
 * | Forward         | UTF target, UTF channel, short len, data | none; `UTF channel, short len, data` to the target(s) |
 * | ForwardToPlayer | UTF player, UTF channel, short len, data | none; the same payload to the player's server         |
 * | Connect         | UTF server                              | none (switches the asking player)                    |
 * | ConnectOther    | UTF player, UTF server                  | none                                                 |
 * | IP              | -                                       | "IP", UTF ip, int port                               |
 * | IPOther         | UTF player                              | "IPOther", UTF name, UTF ip, int port (if online)    |
 * | PlayerCount     | UTF server or "ALL"                     | "PlayerCount", UTF server, int count (if known)      |
 * | PlayerList      | UTF server or "ALL"                     | "PlayerList", UTF server, UTF names joined by ", "   |
 * | GetServers      | -                                       | "GetServers", UTF names joined by ", "               |
 * | GetServer       | -                                       | "GetServer", UTF this server's name                  |
 * | GetPlayerServer | UTF player                              | "GetPlayerServer", UTF player, UTF server or ""      |
 * | UUID            | -                                       | "UUID", UTF undashed UUID                            |
 * | UUIDOther       | UTF player                              | "UUIDOther", UTF name, UTF undashed UUID (if online) |
 * | ServerIP        | UTF server                              | "ServerIP", UTF name, UTF ip, unsigned short port    |
 * | Message         | UTF target or "ALL", UTF legacy text    | none (chat to the player(s))                         |
 * | MessageRaw      | UTF target or "ALL", UTF JSON text      | none                                                 |
 * | KickPlayer      | UTF player, UTF legacy reason           | none                                                 |
 * | KickPlayerRaw   | UTF player, UTF JSON reason             | none                                                 |
 *
 * BungeeCord sends no answer where a lookup finds nothing (e.g. IPOther of an offline player); the answer encoders
 * here are only called when there is one. The UUID strings are undashed (InitialHandler.getUUID).
 */
import { decodeModifiedUtf8, encodeJavaUtf } from "./modifiedUtf8.js"
import { type Invalid, invalid } from "./result.js"
import { undashedUuid } from "./uuid.js"
import { PV_1_13 } from "./versions.js"

export const BUNGEE_CHANNEL_LEGACY = "BungeeCord"
export const BUNGEE_CHANNEL_MODERN = "bungeecord:main"

/** The channel name a backend of `protocolVersion` uses (BungeeCord renames it from 1.13 on: PluginMessage.MODERNISE). */
export const bungeeChannelFor = (protocolVersion: number): string =>
  protocolVersion >= PV_1_13 ? BUNGEE_CHANNEL_MODERN : BUNGEE_CHANNEL_LEGACY

export const isBungeeChannel = (channel: string): boolean => channel === BUNGEE_CHANNEL_LEGACY || channel === BUNGEE_CHANNEL_MODERN

export type BungeeRequest =
  | { readonly _tag: "Forward"; readonly target: string; readonly channel: string; readonly data: Buffer }
  | { readonly _tag: "ForwardToPlayer"; readonly player: string; readonly channel: string; readonly data: Buffer }
  | { readonly _tag: "Connect"; readonly server: string }
  | { readonly _tag: "ConnectOther"; readonly player: string; readonly server: string }
  | { readonly _tag: "IP" }
  | { readonly _tag: "IPOther"; readonly player: string }
  | { readonly _tag: "PlayerCount"; readonly server: string }
  | { readonly _tag: "PlayerList"; readonly server: string }
  | { readonly _tag: "GetServers" }
  | { readonly _tag: "GetServer" }
  | { readonly _tag: "GetPlayerServer"; readonly player: string }
  | { readonly _tag: "UUID" }
  | { readonly _tag: "UUIDOther"; readonly player: string }
  | { readonly _tag: "ServerIP"; readonly server: string }
  | { readonly _tag: "Message"; readonly target: string; readonly message: string }
  | { readonly _tag: "MessageRaw"; readonly target: string; readonly json: string }
  | { readonly _tag: "KickPlayer"; readonly player: string; readonly reason: string }
  | { readonly _tag: "KickPlayerRaw"; readonly player: string; readonly json: string }
  /** A subchannel BungeeCord does not handle either (plugins talk to each other through Forward, not this). */
  | { readonly _tag: "Unknown"; readonly subchannel: string }

export type BungeeSubchannel = Exclude<BungeeRequest["_tag"], "Unknown">

export const BUNGEE_SUBCHANNELS: ReadonlyArray<BungeeSubchannel> = [
  "Forward",
  "ForwardToPlayer",
  "Connect",
  "ConnectOther",
  "IP",
  "IPOther",
  "PlayerCount",
  "PlayerList",
  "GetServers",
  "GetServer",
  "GetPlayerServer",
  "UUID",
  "UUIDOther",
  "ServerIP",
  "Message",
  "MessageRaw",
  "KickPlayer",
  "KickPlayerRaw"
]

class Truncated {}
class Malformed {
  constructor(readonly reason: string) {}
}

/** A DataInputStream over a plugin message's data. */
class JavaInput {
  private at = 0
  constructor(private readonly data: Buffer) {}

  utf(): string {
    if (this.at + 2 > this.data.length) throw new Truncated()
    const length = this.data.readUInt16BE(this.at)
    if (this.at + 2 + length > this.data.length) throw new Truncated()
    const text = decodeModifiedUtf8(this.data, this.at + 2, length)
    if (typeof text !== "string") throw new Malformed(text.reason)
    this.at += 2 + length
    return text
  }

  /** `short len` then `len` bytes, as Forward carries its payload; a negative length fails as Java's array does. */
  shortPrefixed(): Buffer {
    if (this.at + 2 > this.data.length) throw new Truncated()
    const length = this.data.readInt16BE(this.at)
    if (length < 0) throw new Malformed(`negative payload length ${length}`)
    if (this.at + 2 + length > this.data.length) throw new Truncated()
    const out = this.data.subarray(this.at + 2, this.at + 2 + length)
    this.at += 2 + length
    return out
  }
}

/** Reads a request sent by a backend on the BungeeCord channel; extra bytes after the fields are ignored, as Java does. */
export const decodeBungeeRequest = (data: Buffer): { readonly _tag: "Request"; readonly request: BungeeRequest } | Invalid => {
  const input = new JavaInput(data)
  try {
    const request = readRequest(input)
    return { _tag: "Request", request }
  } catch (error) {
    if (error instanceof Truncated) return invalid("BungeeCord request cut short")
    if (error instanceof Malformed) return invalid(`BungeeCord request: ${error.reason}`)
    return invalid(`BungeeCord request: ${error instanceof Error ? error.message : String(error)}`)
  }
}

const readRequest = (input: JavaInput): BungeeRequest => {
  const subchannel = input.utf()
  switch (subchannel) {
    case "Forward": {
      const target = input.utf()
      const channel = input.utf()
      return { _tag: "Forward", target, channel, data: input.shortPrefixed() }
    }
    case "ForwardToPlayer": {
      const player = input.utf()
      const channel = input.utf()
      return { _tag: "ForwardToPlayer", player, channel, data: input.shortPrefixed() }
    }
    case "Connect":
      return { _tag: "Connect", server: input.utf() }
    case "ConnectOther": {
      const player = input.utf()
      return { _tag: "ConnectOther", player, server: input.utf() }
    }
    case "IP":
    case "GetServers":
    case "GetServer":
    case "UUID":
      return { _tag: subchannel }
    case "IPOther":
    case "GetPlayerServer":
    case "UUIDOther":
      return { _tag: subchannel, player: input.utf() }
    case "PlayerCount":
    case "PlayerList":
    case "ServerIP":
      return { _tag: subchannel, server: input.utf() }
    case "Message": {
      const target = input.utf()
      return { _tag: "Message", target, message: input.utf() }
    }
    case "MessageRaw": {
      const target = input.utf()
      return { _tag: "MessageRaw", target, json: input.utf() }
    }
    case "KickPlayer": {
      const player = input.utf()
      return { _tag: "KickPlayer", player, reason: input.utf() }
    }
    case "KickPlayerRaw": {
      const player = input.utf()
      return { _tag: "KickPlayerRaw", player, json: input.utf() }
    }
    default:
      return { _tag: "Unknown", subchannel }
  }
}

export type BungeeAnswer =
  | { readonly _tag: "IP"; readonly ip: string; readonly port: number }
  | { readonly _tag: "IPOther"; readonly player: string; readonly ip: string; readonly port: number }
  | { readonly _tag: "PlayerCount"; readonly server: string; readonly count: number }
  | { readonly _tag: "PlayerList"; readonly server: string; readonly players: ReadonlyArray<string> }
  | { readonly _tag: "GetServers"; readonly servers: ReadonlyArray<string> }
  | { readonly _tag: "GetServer"; readonly server: string }
  | { readonly _tag: "GetPlayerServer"; readonly player: string; readonly server: string }
  | { readonly _tag: "UUID"; readonly uuid: string }
  | { readonly _tag: "UUIDOther"; readonly player: string; readonly uuid: string }
  | { readonly _tag: "ServerIP"; readonly server: string; readonly ip: string; readonly port: number }

export type BungeeEncoded = { readonly _tag: "Data"; readonly data: Buffer } | Invalid

/** DataOutput fields in order: strings by writeUTF, `{ int }` by writeInt, `{ short }` by writeShort. */
const javaOutput = (fields: ReadonlyArray<string | { readonly int: number } | { readonly short: number } | Buffer>): BungeeEncoded => {
  const parts: Array<Buffer> = []
  for (const field of fields) {
    if (typeof field === "string") {
      const utf = encodeJavaUtf(field)
      if (!Buffer.isBuffer(utf)) return utf
      parts.push(utf)
    } else if (Buffer.isBuffer(field)) {
      parts.push(field)
    } else if ("int" in field) {
      const out = Buffer.alloc(4)
      out.writeInt32BE(field.int | 0)
      parts.push(out)
    } else {
      const out = Buffer.alloc(2)
      out.writeUInt16BE(field.short & 0xffff)
      parts.push(out)
    }
  }
  return { _tag: "Data", data: Buffer.concat(parts) }
}

/** Util.csv: names joined by ", ". */
const csv = (names: ReadonlyArray<string>) => names.join(", ")

/** The data of the answer plugin message (send it on `bungeeChannelFor(version)` to the asking backend). */
export const encodeBungeeAnswer = (answer: BungeeAnswer): BungeeEncoded => {
  switch (answer._tag) {
    case "IP":
      return javaOutput(["IP", answer.ip, { int: answer.port }])
    case "IPOther":
      return javaOutput(["IPOther", answer.player, answer.ip, { int: answer.port }])
    case "PlayerCount":
      return javaOutput(["PlayerCount", answer.server, { int: answer.count }])
    case "PlayerList":
      return javaOutput(["PlayerList", answer.server, csv(answer.players)])
    case "GetServers":
      return javaOutput(["GetServers", csv(answer.servers)])
    case "GetServer":
      return javaOutput(["GetServer", answer.server])
    case "GetPlayerServer":
      return javaOutput(["GetPlayerServer", answer.player, answer.server])
    case "UUID":
      return javaOutput(["UUID", undashedUuid(answer.uuid)])
    case "UUIDOther":
      return javaOutput(["UUIDOther", answer.player, undashedUuid(answer.uuid)])
    case "ServerIP":
      return javaOutput(["ServerIP", answer.server, answer.ip, { short: answer.port }])
  }
}

/** What Forward and ForwardToPlayer deliver to the receiving backend: `UTF channel | short len | data`. */
export const encodeBungeeForwarded = (channel: string, data: Buffer): BungeeEncoded => {
  if (data.length > 0x7fff) return invalid(`forwarded payload of ${data.length} bytes (at most 32767)`)
  return javaOutput([channel, { short: data.length }, data])
}
