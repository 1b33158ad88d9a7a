/** Frames of the uncompressed protocol: `VarInt length | VarInt packetId | body`. */
import { readVarInt } from "./varint.js"

export type FrameRead =
  | {
      readonly _tag: "Frame"
      readonly packetId: number
      /** Offsets into the buffer: the body runs from `bodyStart` to `end`; the next frame starts at `end`. */
      readonly bodyStart: number
      readonly end: number
    }
  | { readonly _tag: "Incomplete" }
  | { readonly _tag: "Invalid"; readonly reason: string }

/** Reads one frame at `offset` if it has fully arrived; refuses frames longer than `maxLength`. */
export const readFrame = (buffer: Buffer, offset: number, maxLength: number): FrameRead => {
  const length = readVarInt(buffer, offset)
  if (length._tag !== "Value") return length
  if (length.value <= 0) return { _tag: "Invalid", reason: `frame length ${length.value}` }
  if (length.value > maxLength) return { _tag: "Invalid", reason: `frame of ${length.value} bytes exceeds ${maxLength}` }
  const start = offset + length.size
  const end = start + length.value
  if (buffer.length < end) return { _tag: "Incomplete" }
  const id = readVarInt(buffer, start, end)
  if (id._tag === "Incomplete") return { _tag: "Invalid", reason: "frame too short for a packet id" }
  if (id._tag === "Invalid") return id
  return { _tag: "Frame", packetId: id.value, bodyStart: start + id.size, end }
}
