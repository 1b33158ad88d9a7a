import { describe, expect, it } from "vitest"
import { done, needMore, type Parse, type ReadClient, type ReadError, SocketReader } from "../../../src/services/net/SocketReader.js"
import { memoryConnection } from "../../helpers/memorySocket.js"

/** Done once `n` bytes are buffered, with those bytes. */
const bytes =
  (n: number) =>
  (buffer: Buffer): Parse<string> =>
    buffer.length >= n ? done(buffer.subarray(0, n).toString(), n) : needMore

const settled = <A>(start: (done: (value: A) => void, failed: (error: Error) => void) => void): Promise<A> =>
  new Promise((resolve, reject) => start(resolve, reject))

describe("SocketReader", () => {
  it("reads what is buffered at once, waits for the rest, and tells when it waits and stops waiting", async () => {
    const { client, server } = memoryConnection()
    const reader = new SocketReader(server)
    const waits: Array<boolean> = []
    reader.onWaiting = { waiting: (waiting) => waits.push(waiting) }
    client.write("abcdef")
    await new Promise((resolve) => setImmediate(resolve))
    // The first read waits once for the bytes; the second finds them buffered and never waits.
    expect(await settled<string>((ok, fail) => reader.readThen("one", 100, 1000, bytes(3), ok, fail))).toBe("abc")
    expect(await settled<string>((ok, fail) => reader.readThen("two", 100, 1000, bytes(3), ok, fail))).toBe("def")
    expect(waits).toEqual([true, false])
    const third = settled<string>((ok, fail) => reader.readThen("three", 100, 1000, bytes(4), ok, fail))
    client.write("gh")
    client.write("ij")
    expect(await third).toBe("ghij")
    expect(waits).toEqual([true, false, true, false])
    client.destroy()
  })

  it("fails a waiting read when the peer ends, when the limit is passed and when the time is up", async () => {
    const closing = memoryConnection()
    const ended = new SocketReader(closing.server)
    const read = settled((ok, fail) => ended.readThen("the handshake", 100, 1000, bytes(10), ok, fail))
    closing.client.end("abc")
    await expect(read).rejects.toThrow("connection closed during the handshake")

    const flooding = memoryConnection()
    const large = new SocketReader(flooding.server)
    const tooLarge = settled((ok, fail) => large.readThen("the handshake", 4, 1000, bytes(10), ok, fail))
    flooding.client.write("abcdef")
    await expect(tooLarge).rejects.toThrow("more than 4 bytes during the handshake")

    const silent = memoryConnection()
    const waiting = new SocketReader(silent.server)
    const waits: Array<boolean> = []
    waiting.onWaiting = { waiting: (w) => waits.push(w) }
    await expect(settled((ok, fail) => waiting.readThen("the handshake", 100, 20, bytes(1), ok, fail))).rejects.toThrow(
      "timed out after 20 ms waiting for the handshake"
    )
    expect(waits).toEqual([true, false])
    for (const connection of [closing, flooding, silent]) connection.client.destroy()
  })

  it("a cancelled read calls nothing, stops waiting, and leaves the bytes that come for the next read", async () => {
    const { client, server } = memoryConnection()
    const reader = new SocketReader(server)
    const waits: Array<boolean> = []
    reader.onWaiting = { waiting: (w) => waits.push(w) }
    const called: Array<string> = []
    const cancel = reader.readThen("first", 100, 1000, bytes(2), (v) => called.push(`done ${v}`), (e) => called.push(`failed ${e.message}`))
    cancel()
    client.write("xy")
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(called).toEqual([])
    expect(waits).toEqual([true, false])
    expect(await settled<string>((ok, fail) => reader.readThen("second", 100, 1000, bytes(2), ok, fail))).toBe("xy")
    client.destroy()
  })
  it("a client object takes one read after another, each with its own parse, on sockets read side by side", async () => {
    /** Reads a 2-byte word, then a 3-byte one, then reports; its parse follows the step it is at. */
    class TwoWords implements ReadClient<string, ReadError> {
      readonly seen: Array<string> = []
      step: 2 | 3 = 2
      constructor(
        private readonly reader: SocketReader,
        private readonly finished: (words: Array<string> | ReadError) => void
      ) {}
      parse(buffer: Buffer): Parse<string> {
        return bytes(this.step)(buffer)
      }
      readDone(word: string): void {
        this.seen.push(word)
        if (this.step === 3) return this.finished(this.seen)
        this.step = 3
        this.reader.readFor("the second word", 100, 1000, this)
      }
      readFailed(error: ReadError): void {
        this.finished(error)
      }
    }
    const read = (reader: SocketReader) =>
      new Promise<Array<string> | ReadError>((resolve) => reader.readFor("the first word", 100, 1000, new TwoWords(reader, resolve)))
    const one = memoryConnection()
    const two = memoryConnection()
    const first = read(new SocketReader(one.server))
    const second = read(new SocketReader(two.server))
    one.client.write("ab")
    two.client.write("uvwxy")
    one.client.write("cde")
    expect(await first).toEqual(["ab", "cde"])
    expect(await second).toEqual(["uv", "wxy"])
    for (const { client } of [one, two]) client.destroy()
  })

  it("a client object is told of a timeout and of a close, with what it was reading", async () => {
    const failure = (reader: SocketReader, timeoutMs: number) =>
      new Promise<string>((resolve) =>
        reader.readFor("the handshake", 100, timeoutMs, {
          parse: bytes(5),
          readDone: (value) => resolve(`done ${value}`),
          readFailed: (error) => resolve(`${error._tag}: ${error.message}`)
        })
      )
    const silent = memoryConnection()
    expect(await failure(new SocketReader(silent.server), 20)).toBe("ReadTimeout: timed out after 20 ms waiting for the handshake")
    const closing = memoryConnection()
    const closed = failure(new SocketReader(closing.server), 1000)
    closing.client.end("ab")
    expect(await closed).toBe("ConnectionClosed: connection closed during the handshake")
    silent.client.destroy()
  })
})
