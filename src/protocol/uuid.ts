/**
 * UUIDs in their three forms: 16 bytes on the wire (two big-endian i64, most significant first), dashed text
 * (`069a79f4-44e9-4726-a5be-fca90e38aaf5`, Login Success before 1.16, logs) and undashed text (the session server,
 * BungeeCord forwarding and its plugin channel).
 */
import { formatUuid } from "./PacketReader.js"
import { type Invalid, invalid } from "./result.js"

export const NIL_UUID = "00000000-0000-0000-0000-000000000000"

const DASHED = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const UNDASHED = /^[0-9a-f]{32}$/i

export type UuidParse = { readonly _tag: "Uuid"; readonly uuid: string } | Invalid

/** Accepts the dashed or the undashed form, any case; gives the dashed lower-case form. */
export const parseUuid = (text: string): UuidParse => {
  if (DASHED.test(text)) return { _tag: "Uuid", uuid: text.toLowerCase() }
  if (UNDASHED.test(text)) return { _tag: "Uuid", uuid: formatUuid(Buffer.from(text, "hex")) }
  return invalid(`not a UUID: ${JSON.stringify(text.slice(0, 40))}`)
}

/** The dashed form of 16 wire bytes at `offset`. */
export const uuidFromBytes = (bytes: Buffer, offset = 0): string => formatUuid(bytes.subarray(offset, offset + 16))

/** The 16 wire bytes of a UUID in either text form; Invalid when it is not one. */
export const uuidToBytes = (text: string): { readonly _tag: "Bytes"; readonly bytes: Buffer } | Invalid => {
  const parsed = parseUuid(text)
  if (parsed._tag === "Invalid") return parsed
  return { _tag: "Bytes", bytes: Buffer.from(parsed.uuid.replace(/-/g, ""), "hex") }
}

/** The undashed form of a UUID given in either form (no check beyond removing dashes). */
export const undashedUuid = (uuid: string): string => uuid.replace(/-/g, "").toLowerCase()
