/** Status state: request, response (JSON) and ping/pong. */
import { PacketReader } from "./PacketReader.js"
import { PacketWriter } from "./PacketWriter.js"

/** Backends may send large answers (favicons, mod lists); we read leniently, far above the 32767 of the spec. */
export const MAX_STATUS_RESPONSE_CHARS = 262_144
export const MAX_STATUS_FRAME_BYTES = 16 + MAX_STATUS_RESPONSE_CHARS * 3

export const STATUS_REQUEST = Buffer.from([0x01, 0x00])

export const encodeStatusResponse = (json: string): Buffer => new PacketWriter().string(json).frame(0x00)

export const decodeStatusResponseBody = (body: Buffer): string =>
  new PacketReader(body).string(MAX_STATUS_RESPONSE_CHARS, "status JSON")

export const encodePing = (payload: bigint): Buffer => new PacketWriter().i64(payload).frame(0x01)

/** The pong echoes the client's 8 payload bytes exactly. */
export const encodePongFromBody = (body: Buffer): Buffer => new PacketWriter().bytes(body.subarray(0, 8)).frame(0x01)

/** The status JSON the server list reads; unknown fields of a backend's answer are kept as they are. */
export interface StatusJson {
  version?: { name: string; protocol: number }
  players?: { max: number; online: number; sample?: Array<{ name: string; id: string }> }
  description?: unknown
  favicon?: string
  [key: string]: unknown
}
