/** Status state: request, response (JSON) and ping/pong. */
import { isUtf8 } from "node:buffer"
import { readFrame } from "./frame.js"
import { PacketWriter } from "./PacketWriter.js"
import { readVarInt } from "./varint.js"

/** Backends may send large answers (favicons, mod lists); we read leniently, far above the 32767 of the spec. */
export const MAX_STATUS_RESPONSE_CHARS = 262_144
export const MAX_STATUS_FRAME_BYTES = 16 + MAX_STATUS_RESPONSE_CHARS * 3

export const STATUS_REQUEST = Buffer.from([0x01, 0x00])

export const encodeStatusResponse = (json: string): Buffer => new PacketWriter().string(json).frame(0x00)

export type StatusResponseRead =
  /** A whole status response; `end` is where the next frame would start. */
  | { readonly _tag: "Response"; readonly json: string; readonly end: number }
  | { readonly _tag: "Incomplete" }
  /** Bytes that are not a status response, with what is wrong with them. */
  | { readonly _tag: "Invalid"; readonly reason: string }

const INCOMPLETE: StatusResponseRead = { _tag: "Incomplete" }

/**
 * Reads the status response (packet 0x00: one string) at the start of `buffer`, without throwing: a backend's bytes
 * may be anything. The string must be valid UTF-8; a real server never sends anything else.
 */
export const readStatusResponse = (buffer: Buffer): StatusResponseRead => {
  const frame = readFrame(buffer, 0, MAX_STATUS_FRAME_BYTES)
  if (frame._tag === "Incomplete") return INCOMPLETE
  if (frame._tag === "Invalid") return frame
  if (frame.packetId !== 0x00) return { _tag: "Invalid", reason: `packet 0x${frame.packetId.toString(16)} instead of a status response` }
  const length = readVarInt(buffer, frame.bodyStart, frame.end)
  if (length._tag !== "Value") return { _tag: "Invalid", reason: "a status response without a string length" }
  const start = frame.bodyStart + length.size
  // Bytes after the string are ignored, as a client does.
  if (length.value < 0 || start + length.value > frame.end) {
    return { _tag: "Invalid", reason: `a status string of ${length.value} bytes in a frame with room for ${frame.end - start}` }
  }
  const bytes = buffer.subarray(start, start + length.value)
  if (!isUtf8(bytes)) return { _tag: "Invalid", reason: "a status string that is not valid UTF-8" }
  const json = bytes.toString("utf8")
  if (json.length > MAX_STATUS_RESPONSE_CHARS) return { _tag: "Invalid", reason: `a status string of ${json.length} characters` }
  return { _tag: "Response", json, end: frame.end }
}

export const encodePing = (payload: bigint): Buffer => new PacketWriter().i64(payload).frame(0x01)

/** The pong echoes the client's 8 payload bytes exactly. */
export const encodePongFromBody = (body: Buffer): Buffer => new PacketWriter().bytes(body.subarray(0, 8)).frame(0x01)

/** The status JSON the server list reads; unknown fields of a backend's answer are kept as they are. */
export interface StatusJson {
  version?: { name: string; protocol: number }
  players?: { max: number; online: number; sample?: ReadonlyArray<{ name: string; id: string }> }
  description?: unknown
  favicon?: string
  [key: string]: unknown
}
