/** Writing a packet session's bytes: what waits in Node's queue never points into the shared read buffer. */
import { describe, expect, it } from "vitest"
import { destinationOf, writeTo } from "../../src/services/relay/packet/directWrite.js"
import { sharedReadBuffer } from "../../src/services/relay/userBufferRead.js"
import { socketPair } from "../helpers/net.js"

describe("writeTo", () => {
  it("copies bytes of the shared read buffer that have to wait, so the next read cannot change them", async () => {
    const { near, far } = await socketPair()
    far.pause()
    // Fill the kernel's buffers so that what follows waits in Node's queue.
    const filler = Buffer.alloc(1 << 20, 0x11)
    while (near.write(filler)) {
      // until Node says its queue is full
    }
    const shared = sharedReadBuffer()
    const packet = Buffer.from("a packet that waits behind the filler")
    packet.copy(shared)
    writeTo(destinationOf(near), shared.subarray(0, packet.length))
    shared.fill(0xee, 0, packet.length) // the next read of any socket
    near.end()
    const received: Array<Buffer> = []
    far.on("data", (chunk: Buffer) => received.push(chunk))
    far.resume()
    await new Promise((resolve) => far.once("end", resolve))
    const all = Buffer.concat(received)
    expect(all.subarray(all.length - packet.length)).toEqual(packet)
    far.destroy()
  })
})
