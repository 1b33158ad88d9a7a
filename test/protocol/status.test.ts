/** Reading a backend's status response frame without throwing, whatever the bytes. */
import { describe, expect, it } from "vitest"
import { encodeStatusResponse, MAX_STATUS_FRAME_BYTES, readStatusResponse } from "../../src/protocol/status.js"
import { encodeVarInt } from "../../src/protocol/varint.js"
import { frame, statusAnswerBytes } from "../peers/statusBackend.js"

describe("readStatusResponse", () => {
  it("reads a whole response, and says where it ends", () => {
    const bytes = Buffer.concat([encodeStatusResponse(`{"description":"é"}`), Buffer.from([0x09, 0x01])])
    const read = readStatusResponse(bytes)
    expect(read).toEqual({ _tag: "Response", json: `{"description":"é"}`, end: bytes.length - 2 })
  })

  it("waits for every byte of the frame", () => {
    const bytes = encodeStatusResponse(`{"description":"hello"}`)
    for (let cut = 0; cut < bytes.length; cut++) expect(readStatusResponse(bytes.subarray(0, cut))._tag).toBe("Incomplete")
  })

  it("refuses what is not a status response, with the reason", () => {
    const invalid = (bytes: Buffer) => {
      const read = readStatusResponse(bytes)
      return read._tag === "Invalid" ? read.reason : read._tag
    }
    expect(invalid(Buffer.from("ffffffffff", "hex"))).toBe("VarInt longer than 5 bytes")
    expect(invalid(encodeVarInt(MAX_STATUS_FRAME_BYTES + 1))).toMatch(/^frame of \d+ bytes exceeds \d+$/)
    expect(invalid(frame(0x01, Buffer.alloc(8)))).toBe("packet 0x1 instead of a status response")
    expect(invalid(frame(0x00, Buffer.from([0x80])))).toBe("a status response without a string length")
    expect(invalid(frame(0x00, Buffer.from([0x05, 0x41])))).toBe("a status string of 5 bytes in a frame with room for 1")
    expect(invalid(statusAnswerBytes(Buffer.from([0x22, 0xc3, 0x28, 0x22])))).toBe("a status string that is not valid UTF-8")
  })
})
