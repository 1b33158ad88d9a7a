/** Pass-through frames of one direction leave in as few writes as possible, as views of what arrived (no copy). */
import { describe, expect, it } from "vitest"
import { FrameDecoder } from "../../src/protocol/framing.js"
import { Coalescer } from "../../src/services/relay/packet/coalesce.js"

const frame = (id: number, size: number) => Buffer.concat([Buffer.from([size + 1, id]), Buffer.alloc(size, id)])

describe("Coalescer", () => {
  it("frames that follow each other in a chunk are one write of that chunk's memory", () => {
    const written: Array<Buffer> = []
    const run = new Coalescer((bytes) => written.push(bytes))
    const chunk = Buffer.concat([frame(1, 10), frame(2, 20), frame(3, 30)])
    const decoder = new FrameDecoder()
    decoder.push(chunk)
    for (let next = decoder.next(); next._tag === "Frame"; next = decoder.next()) run.add(next.buffer, next.start, next.end)
    run.flush()
    expect(written).toHaveLength(1)
    expect(written[0]).toEqual(chunk)
    // The very bytes that arrived: no copy.
    expect(written[0]!.buffer).toBe(chunk.buffer)
    expect(written[0]!.byteOffset).toBe(chunk.byteOffset)
  })

  it("a frame left out breaks the range: what came before is written first, in order", () => {
    const written: Array<Buffer> = []
    const run = new Coalescer((bytes) => written.push(Buffer.from(bytes)))
    const chunk = Buffer.concat([frame(1, 4), frame(2, 4), frame(3, 4), frame(4, 4)])
    // Frames 1, 2 and 4 pass; frame 3 is handled (dropped) by the relay.
    run.add(chunk, 0, 6)
    run.add(chunk, 6, 12)
    expect(written).toHaveLength(0)
    run.add(chunk, 18, 24)
    expect(written).toHaveLength(1)
    run.flush()
    run.flush()
    expect(written).toEqual([chunk.subarray(0, 12), chunk.subarray(18, 24)])
    run.add(chunk, 0, 6)
    run.drop()
    run.flush()
    expect(written).toHaveLength(2)
  })
})
