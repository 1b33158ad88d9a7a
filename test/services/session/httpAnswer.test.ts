/** The session client's HTTP/1.1 answer reader, fed whole and byte by byte. */
import { describe, expect, it } from "vitest"
import { AnswerReader, type AnswerStep } from "../../../src/services/session/httpAnswer.js"

/** Feeds `text` in pieces of `piece` bytes (0: at once), then the end of the connection when `close`. */
const read = (text: string | Buffer, piece = 0, close = false, limit = 65_536): AnswerStep => {
  const bytes = Buffer.isBuffer(text) ? text : Buffer.from(text, "latin1")
  const reader = new AnswerReader(limit)
  let step: AnswerStep = { _tag: "More" }
  const size = piece === 0 ? Math.max(1, bytes.length) : piece
  for (let at = 0; at < bytes.length && step._tag === "More"; at += size) step = reader.push(bytes.subarray(at, at + size))
  return step._tag === "More" && close ? reader.end() : step
}

const done = (step: AnswerStep) => {
  if (step._tag !== "Done") throw new Error(`expected an answer, got ${JSON.stringify(step)}`)
  return { status: step.status, body: step.body.toString("latin1"), reusable: step.reusable }
}

const reason = (step: AnswerStep): string => {
  if (step._tag !== "Invalid") throw new Error(`expected a refusal, got ${JSON.stringify(step)}`)
  return step.reason
}

describe("AnswerReader", () => {
  const profile = '{"id":"0123456789abcdef0123456789abcdef","name":"Steve","properties":[]}'
  const withLength = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${profile.length}\r\n\r\n${profile}`
  const chunked = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10;ext=1\r\n${profile.slice(0, 16)}\r\n${(profile.length - 16).toString(16)}\r\n${profile.slice(16)}\r\n0\r\nX-Trailer: yes\r\n\r\n`

  it("reads a body framed by Content-Length, whole or a byte at a time, and keeps the connection", () => {
    for (const piece of [0, 1, 7]) expect(done(read(withLength, piece))).toEqual({ status: 200, body: profile, reusable: true })
  })

  it("reads a chunked body with chunk extensions and trailers, whole or a byte at a time", () => {
    for (const piece of [0, 1, 5]) expect(done(read(chunked, piece))).toEqual({ status: 200, body: profile, reusable: true })
  })

  it("reads a body that runs to the end of the connection, which is then not kept", () => {
    expect(read(`HTTP/1.1 200 OK\r\n\r\n${profile}`)._tag).toBe("More")
    expect(done(read(`HTTP/1.1 200 OK\r\n\r\n${profile}`, 3, true))).toEqual({ status: 200, body: profile, reusable: false })
    // A coding other than chunked last: the body runs to the end too.
    expect(done(read(`HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabcdef`, 0, true))).toEqual({ status: 200, body: "abcdef", reusable: false })
  })

  it("takes lines that end in a bare LF, as Node's own parser does", () => {
    const bare = withLength.replace(/\r\n/g, "\n")
    for (const piece of [0, 1]) expect(done(read(bare, piece))).toEqual({ status: 200, body: profile, reusable: true })
    const mixed = "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\r\n\n2\nok\r\n0\n\r\n"
    for (const piece of [0, 1]) expect(done(read(mixed, piece))).toEqual({ status: 200, body: "ok", reusable: true })
  })

  it("has no body for 204 and 304, and skips interim 1xx answers", () => {
    expect(done(read("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n"))).toEqual({ status: 204, body: "", reusable: true })
    expect(done(read("HTTP/1.1 304 Not Modified\r\n\r\n"))).toEqual({ status: 304, body: "", reusable: true })
    expect(done(read(`HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n${withLength}`, 2))).toEqual({ status: 200, body: profile, reusable: true })
    expect(reason(read("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"))).toMatch(/switched protocols/)
  })

  it("keeps a connection only when the answer allows it", () => {
    expect(done(read("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")).reusable).toBe(false)
    expect(done(read("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")).reusable).toBe(false)
    expect(done(read("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok")).reusable).toBe(true)
    // Bytes nobody asked for after the answer: the connection cannot be trusted with the next one.
    expect(done(read("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA")).reusable).toBe(false)
    // Transfer-Encoding wins over Content-Length.
    expect(done(read("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"))).toEqual({ status: 200, body: "ok", reusable: true })
  })

  it("refuses what is not an HTTP/1.x answer, with the reason", () => {
    expect(reason(read("SSH-2.0-OpenSSH_9.2\r\n\r\n"))).toMatch(/not an HTTP\/1.x status line: "SSH-2.0/)
    expect(reason(read("HTTP/2 200\r\n\r\n"))).toMatch(/status line/)
    expect(reason(read("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"))).toMatch(/malformed header line/)
    expect(reason(read("HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n"))).toMatch(/malformed header line/)
    expect(reason(read("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"))).toMatch(/Content-Length that is not a number/)
    expect(reason(read("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"))).toMatch(/two different Content-Length/)
    expect(reason(read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"))).toMatch(/malformed chunk size/)
    expect(reason(read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokay\r\n0\r\n\r\n"))).toMatch(/longer than its size/)
  })

  it("refuses heads over 16 KiB and bodies over the limit, however they are framed", () => {
    expect(reason(read(`HTTP/1.1 200 OK\r\nX-Big: ${"a".repeat(17_000)}\r\n\r\n`))).toMatch(/headers over 16384 bytes/)
    expect(reason(read(`HTTP/1.1 200 OK\r\nX-Big: ${"a".repeat(17_000)}`, 1000))).toMatch(/headers over 16384 bytes/)
    expect(reason(read("HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n", 0, false, 100))).toMatch(/more than 100 bytes/)
    expect(reason(read(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n${"a".repeat(64)}\r\n40\r\n${"a".repeat(64)}\r\n0\r\n\r\n`, 0, false, 100))).toMatch(/more than 100 bytes/)
    expect(reason(read(`HTTP/1.1 200 OK\r\n\r\n${"a".repeat(101)}`, 10, false, 100))).toMatch(/more than 100 bytes/)
    expect(done(read("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + "a".repeat(100), 0, false, 100)).body.length).toBe(100)
  })

  it("says when the connection closed before or in the middle of an answer", () => {
    expect(reason(read("", 0, true))).toBe("the connection closed before an answer")
    expect(reason(read("HTTP/1.1 200 OK\r\nContent-Len", 0, true))).toBe("the connection closed before an answer")
    expect(reason(read("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, true))).toBe("the connection closed in the middle of the answer")
    expect(reason(read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 0, true))).toBe("the connection closed in the middle of the answer")
  })

  it("knows whether any byte of an answer came (a reused connection may be retried only before)", () => {
    const reader = new AnswerReader(100)
    expect(reader.started).toBe(false)
    reader.push(Buffer.from("HTTP/1.1 2"))
    expect(reader.started).toBe(true)
  })

  it("keeps the body's bytes when the chunks it came in are reused", () => {
    const reader = new AnswerReader(100)
    const chunk = Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n", "latin1")
    reader.push(chunk)
    chunk.fill(0)
    expect(done(reader.push(Buffer.from("0\r\n\r\n"))).body).toBe("ok")
  })
})
