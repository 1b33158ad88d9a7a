/**
 * The passthrough forwarder on real loopback sockets: bytes read into the buffer shared by all quiet directions must
 * be copied before they wait in a backed-up destination, since the next read of any socket reuses that buffer.
 */
import { createHash, randomBytes } from "node:crypto"
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { loadNativeAddon } from "../../src/services/native/addon.js"
import { type DirectSend, forward, forwardWithEvents } from "../../src/services/relay/forwarder.js"
import { socketPair as connectedPair } from "../helpers/net.js"
import { waitFor } from "../helpers/wait.js"

const sha = (data: Buffer) => createHash("sha256").update(data).digest("hex")
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const cleanup: Array<() => void> = []
afterEach(() => {
  for (const step of cleanup.splice(0)) step()
})

/** A connected pair of loopback sockets, destroyed after the test. */
const socketPair = async (): Promise<{ near: net.Socket; far: net.Socket }> => {
  const pair = await connectedPair()
  cleanup.push(() => {
    pair.near.destroy()
    pair.far.destroy()
  })
  return pair
}

const collect = (socket: net.Socket) => {
  const chunks: Array<Buffer> = []
  socket.on("data", (chunk: Buffer) => chunks.push(chunk))
  return () => Buffer.concat(chunks)
}

describe("forwarder", () => {
  it.each([
    ["sent straight to the kernel where nothing waits", true],
    ["always copied and written (no addon)", false]
  ])("small reads waiting behind a backed-up destination keep their bytes while other sessions read (%s)", async (_, directSend) => {
    // Session 1: its player does not read, so what Portal writes to it queues up in Node.
    const source1 = await socketPair()
    const destination1 = await socketPair()
    // Session 2: busy meanwhile, reading small packets into the same shared buffer.
    const source2 = await socketPair()
    const destination2 = await socketPair()
    forward(source1.far, destination1.near, { directSend })
    forward(source2.far, destination2.near, { directSend })
    const atPlayer1 = collect(destination1.far)
    const atPlayer2 = collect(destination2.far)
    destination1.far.pause()

    const filler = randomBytes(32 << 20)
    destination1.near.write(filler)
    await waitFor(() => destination1.near.writableLength > 0 || undefined, { what: "a backed-up destination" })

    const packets1: Array<Buffer> = []
    const packets2: Array<Buffer> = []
    for (let i = 0; i < 60; i++) {
      const one = randomBytes(100 + i)
      const two = randomBytes(300 + i)
      packets1.push(one)
      packets2.push(two)
      source1.near.write(one)
      await sleep(2)
      source2.near.write(two)
      await sleep(2)
    }
    const expected2 = Buffer.concat(packets2)
    await waitFor(() => atPlayer2().length >= expected2.length || undefined, { what: "session 2's packets" })
    expect(destination1.near.writableLength).toBeGreaterThan(filler.length / 4)

    destination1.far.resume()
    const expected1 = Buffer.concat([filler, ...packets1])
    await waitFor(() => atPlayer1().length >= expected1.length || undefined, { timeoutMs: 15_000, what: "session 1's bytes" })
    expect(sha(atPlayer1())).toBe(sha(expected1))
    expect(sha(atPlayer2())).toBe(sha(expected2))
  })

  it("small packets to a destination with nothing queued bypass Node's writes, and are counted", async () => {
    const source = await socketPair()
    const destination = await socketPair()
    const direction = forward(source.far, destination.near)
    const atPlayer = collect(destination.far)
    const packets = Array.from({ length: 50 }, (_, i) => randomBytes(100 + i))
    for (const packet of packets) {
      source.near.write(packet)
      await sleep(2)
    }
    const expected = Buffer.concat(packets)
    await waitFor(() => atPlayer().length >= expected.length || undefined, { what: "the packets" })
    expect(sha(atPlayer())).toBe(sha(expected))
    expect(direction.bytesRead).toBe(expected.length)
    expect(direction.bytesHanded).toBe(expected.length)
    // Node counts only what went through its own writes: none did.
    expect(destination.near.bytesWritten).toBe(0)
  })

  it("once stopped, the source socket no longer reaches its direction as its reader (nor, through it, the other socket)", async () => {
    const source = await socketPair()
    const destination = await socketPair()
    const direction = forward(source.far, destination.near)
    const readerOf = (socket: net.Socket): unknown => {
      const key = Object.getOwnPropertySymbols(socket).find((symbol) => symbol.description === "portal.reader")
      return key === undefined ? undefined : (socket as unknown as Record<symbol, unknown>)[key]
    }
    expect(readerOf(source.far)).toBe(direction)
    direction.stop()
    expect(readerOf(source.far)).toBeUndefined()
  })

  it("when the kernel takes only part of a packet, the rest is queued behind it and nothing is lost or repeated", async () => {
    const loaded = loadNativeAddon()
    if (!("addon" in loaded)) return expect(loaded.reason).toBeTruthy()
    const { addon } = loaded
    let calls = 0
    // The real send(2), asked for less than given, and now and then for nothing (as when the buffer is full).
    const stingy: DirectSend = (fd, bytes, length) => (++calls % 5 === 0 ? 0 : addon.send(fd, bytes, Math.min(length, 37)))
    const source = await socketPair()
    const destination = await socketPair()
    forward(source.far, destination.near, { directSend: stingy })
    const atPlayer = collect(destination.far)
    const packets = Array.from({ length: 80 }, (_, i) => randomBytes(50 + ((i * 37) % 400)))
    for (const packet of packets) {
      source.near.write(packet)
      await sleep(1)
    }
    const expected = Buffer.concat(packets)
    await waitFor(() => atPlayer().length >= expected.length || undefined, { what: "the packets" })
    await sleep(50)
    expect(sha(atPlayer())).toBe(sha(expected))
    expect(calls).toBeGreaterThan(10)
  })

  // Where Node lacks the user-buffer internals, directions fall back to data events: the same guarantees.
  const kinds = [
    ["reading into Portal's buffers", forward],
    ["the data-event fallback", forwardWithEvents]
  ] as const

  it.each(kinds)("%s: a direction that waits on a full destination pauses its source, and loses nothing", async (_, start) => {
    const source = await socketPair()
    const destination = await socketPair()
    start(source.far, destination.near)
    const atPlayer = collect(destination.far)
    destination.far.pause()
    const data = randomBytes(24 << 20)
    source.near.write(data)
    await waitFor(() => destination.near.writableLength > 0 || undefined, { what: "a backed-up destination" })
    await sleep(200)
    // Paused, the source leaves the rest in the kernel instead of queueing all of it in Node.
    expect(destination.near.writableLength).toBeLessThan(data.length / 2)
    destination.far.resume()
    await waitFor(() => atPlayer().length >= data.length || undefined, { timeoutMs: 15_000, what: "all bytes" })
    expect(sha(atPlayer())).toBe(sha(data))
  })

  it.each(kinds)("%s: discard drops what the source sends from then on and keeps reading it", async (_, start) => {
    const source = await socketPair()
    const destination = await socketPair()
    const direction = start(source.far, destination.near)
    const atPlayer = collect(destination.far)
    const before = randomBytes(1000)
    source.near.write(before)
    await waitFor(() => atPlayer().length >= before.length || undefined, { what: "the first bytes" })
    direction.discard()
    const readBefore = source.far.bytesRead
    source.near.write(randomBytes(100_000))
    await waitFor(() => source.far.bytesRead >= readBefore + 100_000 || undefined, { what: "the dropped bytes read" })
    await sleep(50)
    expect(atPlayer()).toEqual(before)
    // Dropped bytes still count as read (the watchdog sees a backend that talks), not as handed on.
    await waitFor(() => direction.bytesRead >= before.length + 100_000 || undefined, { what: "the dropped bytes counted" })
    expect(direction.bytesHanded).toBe(before.length)
  })
})
