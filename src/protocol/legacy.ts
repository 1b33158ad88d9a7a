/** Pre-1.7 clients: the three generations of server-list ping, and the kick that answers them and old logins. */
import { ProtocolError } from "./ProtocolError.js"

export type LegacyPing =
  /** Beta 1.8 - 1.3: `FE`. */
  | { readonly _tag: "Beta" }
  /** 1.4 - 1.5: `FE 01`. */
  | { readonly _tag: "V1_4" }
  /** 1.6: `FE 01 FA` + `MC|PingHost` with the protocol, host and port. */
  | { readonly _tag: "V1_6"; readonly protocolVersion: number; readonly host: string; readonly port: number }

export type LegacyDetection =
  | { readonly _tag: "Modern" }
  | { readonly _tag: "NeedMore" }
  /** `FE` or `FE 01` with nothing after it yet: a ping if nothing follows shortly. */
  | { readonly _tag: "MaybePing"; readonly ping: LegacyPing }
  | { readonly _tag: "Ping"; readonly ping: LegacyPing }
  /** A pre-1.7 login (`02 ...`). */
  | { readonly _tag: "Login" }
  | { readonly _tag: "Invalid"; readonly reason: string }

const PING_HOST_CHANNEL = "MC|PingHost"
const MAX_LEGACY_HOST_CHARS = 255

const readUtf16 = (buffer: Buffer, offset: number, units: number): string => {
  const slice = Buffer.from(buffer.subarray(offset, offset + units * 2))
  return slice.swap16().toString("utf16le")
}

/**
 * Decides from the first bytes whether a connection is a legacy ping, a legacy login or a modern frame.
 * A modern frame of exactly 254 bytes also starts `FE 01`: the third byte decides (`FA` is a 1.6 ping).
 */
export const detectLegacy = (buffer: Buffer): LegacyDetection => {
  if (buffer.length === 0) return { _tag: "NeedMore" }
  const first = buffer[0]!
  if (first === 0x02) return { _tag: "Login" }
  if (first !== 0xfe) return { _tag: "Modern" }
  if (buffer.length === 1) return { _tag: "MaybePing", ping: { _tag: "Beta" } }
  if (buffer[1] !== 0x01) return { _tag: "Modern" }
  if (buffer.length === 2) return { _tag: "MaybePing", ping: { _tag: "V1_4" } }
  if (buffer[2] !== 0xfa) return { _tag: "Modern" }
  return parsePingHost(buffer)
}

/** `FE 01 FA | u16 len | "MC|PingHost" UTF-16BE | u16 dataLen | u8 protocol | u16 hostLen | host UTF-16BE | i32 port`. */
const parsePingHost = (buffer: Buffer): LegacyDetection => {
  try {
    let offset = 3
    const need = (bytes: number) => {
      if (buffer.length < offset + bytes) throw new NeedMore()
    }
    need(2)
    const channelUnits = buffer.readUInt16BE(offset)
    offset += 2
    if (channelUnits !== PING_HOST_CHANNEL.length) throw new ProtocolError({ reason: "1.6 ping without MC|PingHost" })
    need(channelUnits * 2)
    if (readUtf16(buffer, offset, channelUnits) !== PING_HOST_CHANNEL) throw new ProtocolError({ reason: "1.6 ping without MC|PingHost" })
    offset += channelUnits * 2
    need(2)
    const dataLength = buffer.readUInt16BE(offset)
    offset += 2
    if (dataLength < 7 || dataLength > 7 + MAX_LEGACY_HOST_CHARS * 2) throw new ProtocolError({ reason: `1.6 ping data of ${dataLength} bytes` })
    need(dataLength)
    const protocolVersion = buffer[offset]!
    const hostUnits = buffer.readUInt16BE(offset + 1)
    if (3 + hostUnits * 2 + 4 !== dataLength) throw new ProtocolError({ reason: "1.6 ping host length does not match its data length" })
    const host = readUtf16(buffer, offset + 3, hostUnits)
    const port = buffer.readInt32BE(offset + 3 + hostUnits * 2)
    if (port < 0 || port > 65535) throw new ProtocolError({ reason: `1.6 ping port ${port}` })
    return { _tag: "Ping", ping: { _tag: "V1_6", protocolVersion, host, port } }
  } catch (error) {
    if (error instanceof NeedMore) return { _tag: "NeedMore" }
    return { _tag: "Invalid", reason: error instanceof Error ? error.message : String(error) }
  }
}

class NeedMore {}

/** The `FF` kick packet: `FF | u16 length in UTF-16 units | UTF-16BE text`. */
export const encodeLegacyKick = (text: string): Buffer => {
  const body = Buffer.from(text, "utf16le").swap16()
  const header = Buffer.alloc(3)
  header[0] = 0xff
  header.writeUInt16BE(text.length, 1)
  return Buffer.concat([header, body])
}

export interface LegacyStatus {
  readonly protocolVersion: number
  readonly versionName: string
  /** MOTD with `§` codes. */
  readonly motd: string
  readonly online: number
  readonly max: number
}

/** The answer to a legacy ping in the form that generation of client reads. */
export const encodeLegacyPingResponse = (ping: LegacyPing, status: LegacyStatus): Buffer => {
  if (ping._tag === "Beta") {
    // Beta clients split on `§`, so the MOTD cannot carry formatting codes.
    const motd = status.motd.replace(/§./g, "").replace(/§/g, "")
    return encodeLegacyKick(`${motd}§${status.online}§${status.max}`)
  }
  return encodeLegacyKick(
    ["§1", String(status.protocolVersion), status.versionName, status.motd, String(status.online), String(status.max)].join("\0")
  )
}
