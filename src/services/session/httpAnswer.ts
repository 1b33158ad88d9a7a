/**
 * Reads one HTTP/1.1 answer from the bytes of a connection, as they arrive (RFC 9112): the status line and headers,
 * then a body framed by `Transfer-Encoding: chunked`, by `Content-Length`, or by the end of the connection; interim
 * 1xx answers are skipped, 204 and 304 have no body. Bounded: a head over 16 KiB or a body over the caller's limit
 * is refused. Pure: no sockets, so that it is tested byte by byte.
 */

const MAX_HEAD_BYTES = 16_384
const MAX_CHUNK_LINE_BYTES = 1024

export type AnswerStep =
  | { readonly _tag: "More" }
  | {
      readonly _tag: "Done"
      readonly status: number
      readonly body: Buffer
      /** Whether the connection may carry another request: HTTP/1.1 without `close`, body framed, nothing extra. */
      readonly reusable: boolean
    }
  | { readonly _tag: "Invalid"; readonly reason: string }

const MORE: AnswerStep = { _tag: "More" }
/** Lines end in CRLF; a bare LF is taken too, as Node's own parser and most clients take it. */
const LINE_END = /\r?\n/

const invalid = (reason: string): AnswerStep => ({ _tag: "Invalid", reason })

/** Where the head ends: the index where its last line's end begins, and where the body begins; or undefined. */
const headEnd = (bytes: Buffer): { readonly at: number; readonly body: number } | undefined => {
  for (let from = 0; ; ) {
    const lf = bytes.indexOf(10, from)
    if (lf < 0) return undefined
    // The blank line that follows: LF, or CR LF.
    const blank = bytes[lf + 1] === 10 ? 1 : bytes[lf + 1] === 13 && bytes[lf + 2] === 10 ? 2 : 0
    if (blank > 0) return { at: lf > 0 && bytes[lf - 1] === 13 ? lf - 1 : lf, body: lf + 1 + blank }
    from = lf + 1
  }
}

type Framing = { readonly _tag: "Length"; readonly length: number } | { readonly _tag: "Chunked" } | { readonly _tag: "UntilClose" }

interface Head {
  readonly status: number
  readonly framing: Framing
  readonly keepAlive: boolean
}

/** Token lists (`Connection`, `Transfer-Encoding`), lower-cased. */
const tokens = (value: string): Array<string> =>
  value
    .split(",")
    .map((token) => token.trim().toLowerCase())
    .filter((token) => token !== "")

const parseHead = (text: string): Head | string => {
  const lines = text.split(LINE_END)
  const statusLine = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(lines[0]!)
  if (statusLine === null) return `not an HTTP/1.x status line: ${JSON.stringify(lines[0]!.slice(0, 60))}`
  const minor = Number(statusLine[1])
  const status = Number(statusLine[2])
  let length: number | undefined
  let chunked = false
  let transferEncoded = false
  let close = minor === 0
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!
    const colon = line.indexOf(":")
    if (colon <= 0 || line.startsWith(" ") || line.startsWith("\t")) return `a malformed header line: ${JSON.stringify(line.slice(0, 60))}`
    const name = line.slice(0, colon).toLowerCase()
    const value = line.slice(colon + 1).trim()
    if (name === "content-length") {
      if (!/^\d{1,15}$/.test(value)) return `a Content-Length that is not a number: ${JSON.stringify(value.slice(0, 30))}`
      if (length !== undefined && length !== Number(value)) return "two different Content-Length headers"
      length = Number(value)
    } else if (name === "transfer-encoding") {
      transferEncoded = true
      const codings = tokens(value)
      chunked = codings[codings.length - 1] === "chunked"
    } else if (name === "connection") {
      const options = tokens(value)
      if (options.includes("close")) close = true
      else if (minor === 0 && options.includes("keep-alive")) close = false
    }
  }
  // Transfer-Encoding wins over Content-Length; a coding other than chunked last runs to the end of the connection.
  const framing: Framing =
    status === 204 || status === 304 || (status >= 100 && status < 200)
      ? { _tag: "Length", length: 0 }
      : transferEncoded
        ? chunked
          ? { _tag: "Chunked" }
          : { _tag: "UntilClose" }
        : length !== undefined
          ? { _tag: "Length", length }
          : { _tag: "UntilClose" }
  return { status, framing, keepAlive: !close && framing._tag !== "UntilClose" }
}

export class AnswerReader {
  private pending: Buffer = Buffer.alloc(0)
  private head: Head | undefined
  private readonly parts: Array<Buffer> = []
  private bodyBytes = 0
  /**
   * Chunked bodies: bytes of data left in the current chunk; -3 before the line end that follows a chunk's data, -1
   * before a chunk size, -2 in the trailers.
   */
  private chunkLeft = -1
  private finished = false

  constructor(private readonly maxBodyBytes: number) {}

  /** Whether any byte of an answer has arrived (a reused connection that fails before it may be retried). */
  get started(): boolean {
    return this.head !== undefined || this.pending.length > 0
  }

  /** The next bytes of the connection. */
  push(chunk: Buffer): AnswerStep {
    if (this.finished) return chunk.length === 0 ? MORE : invalid("bytes after the end of the answer")
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    return this.advance()
  }

  /** The connection ended: the end of a body that runs until then, else an answer cut short. */
  end(): AnswerStep {
    if (this.finished) return MORE
    if (this.head !== undefined && this.head.framing._tag === "UntilClose") return this.done(false)
    return invalid(this.head === undefined ? "the connection closed before an answer" : "the connection closed in the middle of the answer")
  }

  private advance(): AnswerStep {
    for (;;) {
      if (this.head === undefined) {
        const end = headEnd(this.pending)
        if (end === undefined) return this.pending.length > MAX_HEAD_BYTES ? invalid(`answer headers over ${MAX_HEAD_BYTES} bytes`) : MORE
        if (end.at > MAX_HEAD_BYTES) return invalid(`answer headers over ${MAX_HEAD_BYTES} bytes`)
        const head = parseHead(this.pending.toString("latin1", 0, end.at))
        if (typeof head === "string") return invalid(head)
        this.pending = this.pending.subarray(end.body)
        if (head.status >= 100 && head.status < 200) {
          if (head.status === 101) return invalid("the service switched protocols")
          continue // an interim answer; the real one follows
        }
        this.head = head
      }
      const framing = this.head.framing
      switch (framing._tag) {
        case "Length": {
          const want = framing.length - this.bodyBytes
          if (framing.length > this.maxBodyBytes) return this.tooLarge()
          const take = Math.min(want, this.pending.length)
          if (take > 0) this.keep(this.pending.subarray(0, take))
          this.pending = this.pending.subarray(take)
          if (this.bodyBytes < framing.length) return MORE
          return this.done(this.head.keepAlive && this.pending.length === 0)
        }
        case "UntilClose": {
          if (this.pending.length > 0) this.keep(this.pending)
          this.pending = Buffer.alloc(0)
          return this.bodyBytes > this.maxBodyBytes ? this.tooLarge() : MORE
        }
        case "Chunked":
          return this.chunked() ?? MORE
      }
    }
  }

  /** Walks chunk sizes, data and trailers as far as the bytes go; a step once the answer is done or broken. */
  private chunked(): AnswerStep | undefined {
    for (;;) {
      if (this.chunkLeft > 0) {
        const take = Math.min(this.chunkLeft, this.pending.length)
        if (take === 0) return undefined
        this.keep(this.pending.subarray(0, take))
        if (this.bodyBytes > this.maxBodyBytes) return this.tooLarge()
        this.pending = this.pending.subarray(take)
        this.chunkLeft -= take
        if (this.chunkLeft === 0) this.chunkLeft = -3 // the CRLF after the data
        continue
      }
      const line = this.pending.indexOf(10)
      if (line < 0) return this.pending.length > MAX_CHUNK_LINE_BYTES ? invalid("a chunk line too long") : undefined
      const text = this.pending.toString("latin1", 0, line > 0 && this.pending[line - 1] === 13 ? line - 1 : line)
      this.pending = this.pending.subarray(line + 1)
      if (this.chunkLeft === -3) {
        if (text !== "") return invalid("chunk data longer than its size")
        this.chunkLeft = -1
      } else if (this.chunkLeft === -1) {
        const size = /^([0-9a-fA-F]{1,8})[ \t]*(?:;.*)?$/.exec(text)
        if (size === null) return invalid(`a malformed chunk size: ${JSON.stringify(text.slice(0, 30))}`)
        const bytes = parseInt(size[1]!, 16)
        if (this.bodyBytes + bytes > this.maxBodyBytes) return this.tooLarge()
        this.chunkLeft = bytes === 0 ? -2 : bytes
      } else if (text === "") {
        // The empty line after the trailers ends the answer.
        return this.done(this.head!.keepAlive && this.pending.length === 0)
      }
      // else: a trailer field, ignored
    }
  }

  private keep(bytes: Buffer): void {
    // Copied: the chunk may be a buffer the connection reuses.
    this.parts.push(Buffer.from(bytes))
    this.bodyBytes += bytes.length
  }

  private tooLarge(): AnswerStep {
    this.finished = true
    return invalid(`an answer of more than ${this.maxBodyBytes} bytes`)
  }

  private done(reusable: boolean): AnswerStep {
    this.finished = true
    const body = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts)
    return { _tag: "Done", status: this.head!.status, body, reusable }
  }
}
