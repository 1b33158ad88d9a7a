/** minecraft-protocol's own codecs, as the independent implementation the protocol tests compare Portal with. */
import { createRequire } from "node:module"
import type { Transform } from "node:stream"
import { packetIdsFor, versionNamesOf } from "../../src/protocol/packetIds.js"
import { encodeVarInt, readVarInt } from "../../src/protocol/varint.js"

const require = createRequire(import.meta.url)

interface McSerializer {
  createPacketBuffer(packet: { name: string; params: Record<string, unknown> }): Buffer
}
interface McDeserializer {
  parsePacketBuffer(buffer: Buffer): { data: { name: string; params: Record<string, unknown> } }
}
const mc = require("minecraft-protocol") as {
  createSerializer(options: { state: string; isServer: boolean; version: string }): McSerializer
  createDeserializer(options: { state: string; isServer: boolean; version: string }): McDeserializer
}

export const nbt = require("prismarine-nbt") as {
  protos: { big: { parsePacketBuffer(type: string, buffer: Buffer): { data: unknown; metadata: { size: number } }; createPacketBuffer(type: string, value: unknown): Buffer } }
  simplify(value: unknown): unknown
}

export const compression = require("minecraft-protocol/src/transforms/compression.js") as {
  createCompressor(threshold: number): Transform
  createDecompressor(threshold: number, hideErrors: boolean): Transform
}
export const framing = require("minecraft-protocol/src/transforms/framing.js") as {
  createSplitter(): Transform
  createFramer(): Transform
}
export const encryption = require("minecraft-protocol/src/transforms/encryption.js") as {
  createCipher(secret: Buffer): Transform & { update?: (data: Buffer) => Buffer }
  createDecipher(secret: Buffer): Transform & { update?: (data: Buffer) => Buffer }
}

export type State = "login" | "configuration" | "play"
export type Direction = "clientbound" | "serverbound"

/** The version name minecraft-protocol knows a protocol number by (the newest release speaking it). */
export const versionName = (protocolVersion: number): string => {
  const names = versionNamesOf(protocolVersion)
  if (names === undefined) throw new Error(`no table for protocol ${protocolVersion}`)
  return names[names.length - 1]!
}

const serializers = new Map<string, McSerializer>()
const deserializers = new Map<string, McDeserializer>()

/** A server writes clientbound packets and reads serverbound ones. */
const options = (state: State, direction: Direction, protocolVersion: number, writing: boolean) => ({
  state,
  isServer: writing === (direction === "clientbound"),
  version: versionName(protocolVersion)
})

/** Packet as minecraft-protocol writes it: returns the body (id stripped) and the id it used. */
export const mcEncode = (
  state: State,
  direction: Direction,
  protocolVersion: number,
  name: string,
  params: Record<string, unknown>
): { id: number; body: Buffer } => {
  const key = `${state}/${direction}/${protocolVersion}`
  let serializer = serializers.get(key)
  if (serializer === undefined) {
    serializer = mc.createSerializer(options(state, direction, protocolVersion, true))
    serializers.set(key, serializer)
  }
  const buffer = serializer.createPacketBuffer({ name, params })
  const id = readVarInt(buffer)
  if (id._tag !== "Value") throw new Error("no id")
  return { id: id.value, body: buffer.subarray(id.size) }
}

/** Packet `id | body` as minecraft-protocol reads it. */
export const mcDecode = (
  state: State,
  direction: Direction,
  protocolVersion: number,
  id: number,
  body: Buffer
): { name: string; params: Record<string, unknown> } => {
  const key = `${state}/${direction}/${protocolVersion}`
  let deserializer = deserializers.get(key)
  if (deserializer === undefined) {
    deserializer = mc.createDeserializer(options(state, direction, protocolVersion, false))
    deserializers.set(key, deserializer)
  }
  return deserializer.parsePacketBuffer(Buffer.concat([encodeVarInt(id), body])).data
}

export const idsOf = (protocolVersion: number) => {
  const ids = packetIdsFor(protocolVersion)
  if (ids === undefined) throw new Error(`no ids for ${protocolVersion}`)
  return ids
}

/** Runs chunks through a (synchronous-in-practice) minecraft-protocol transform and collects what comes out. */
export const runTransform = (transform: Transform, chunks: ReadonlyArray<Buffer>): Promise<Array<Buffer>> =>
  new Promise((resolve, reject) => {
    const out: Array<Buffer> = []
    transform.on("data", (data: Buffer) => out.push(Buffer.from(data)))
    transform.on("end", () => resolve(out))
    transform.on("error", reject)
    for (const chunk of chunks) transform.write(chunk)
    transform.end()
  })

/** A deterministic pseudo-random source, so a failing split can be replayed. */
export const seeded = (seed: number) => {
  let state = seed >>> 0 || 1
  return (below: number): number => {
    state ^= state << 13
    state >>>= 0
    state ^= state >>> 17
    state ^= state << 5
    state >>>= 0
    return state % below
  }
}

/** `bytes` cut at random places into pieces of 1..maxPiece bytes. */
export const splitRandomly = (bytes: Buffer, random: (below: number) => number, maxPiece: number): Array<Buffer> => {
  const pieces: Array<Buffer> = []
  let at = 0
  while (at < bytes.length) {
    const size = 1 + random(maxPiece)
    pieces.push(bytes.subarray(at, Math.min(bytes.length, at + size)))
    at += size
  }
  return pieces
}

/** minecraft-protocol reads an i64 as `[high, low]` 32-bit halves (or a bigint): the value as a bigint. */
export const mcLong = (value: unknown): bigint => {
  if (typeof value === "bigint") return value
  const [high, low] = value as [number, number]
  return BigInt.asIntN(64, (BigInt(high) << 32n) | BigInt(low >>> 0))
}
