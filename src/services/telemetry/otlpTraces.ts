/**
 * Connection records (connectionTrace.ts) as OTLP trace requests: each record becomes a root span for the connection
 * and a child span for each phase it went through, with the times the data plane took, encoded straight into an
 * `ExportTraceServiceRequest` (opentelemetry-proto, collector/trace/v1) for the SDK's OTLP transport (exporters.ts).
 *
 * Why not the SDK's tracer: a login makes six spans, and making them as SDK spans, then having the SDK's transformer
 * serialize them, cost about 35 µs per login (measured: 20 µs to make, 15 µs to serialize), a quarter of what a whole
 * login costs Portal on one core: the connection rate fell to 0.7x. Written here from the record, the same request
 * costs a few microseconds. The tests decode it with the official protobuf definitions.
 *
 * Names and attributes: docs/telemetry.md.
 */
import { randomFillSync } from "node:crypto"
import type { ConnectionTrace } from "./connectionTrace.js"
import { LENGTH_DELIMITED, ProtoWriter, VARINT, varintSize } from "./protoWriter.js"

/** OTLP's SpanKind and StatusCode values. */
const KIND_INTERNAL = 1
const KIND_SERVER = 2
const KIND_CLIENT = 3
const STATUS_ERROR = 2

/** Refusals that mean Portal could not serve the player (rather than chose not to): their root spans are errors. */
const FAILED_REFUSALS = new Set(["backend_unreachable", "unavailable"])

/** A constant string encoded once with its field tag and length. */
const encoded = (field: number, text: string): Buffer => {
  const writer = new ProtoWriter(64 + text.length * 3)
  writer.stringField(field, text)
  return Buffer.from(writer.finish())
}

/** Attribute keys and span names, each encoded once (KeyValue.key is field 1; Span.name is field 5). */
const keyCache = new Map<string, Buffer>()
const keyOf = (key: string): Buffer => {
  let bytes = keyCache.get(key)
  if (bytes === undefined) keyCache.set(key, (bytes = encoded(1, key)))
  return bytes
}
const nameCache = new Map<string, Buffer>()
const nameOf = (name: string): Buffer => {
  let bytes = nameCache.get(name)
  if (bytes === undefined) nameCache.set(name, (bytes = encoded(5, name)))
  return bytes
}

const isAscii = (text: string): boolean => {
  for (let index = 0; index < text.length; index++) if (text.charCodeAt(index) >= 0x80) return false
  return true
}

/**
 * Random span and trace ids from a pool: a record reserves what its spans need first (the pool is refilled then, if
 * it must), so that no id a record has taken is overwritten while the record is written.
 */
class Ids {
  private readonly pool = Buffer.allocUnsafe(64 * 1024)
  private next = this.pool.length

  reserve(bytes: number): void {
    if (this.next + bytes <= this.pool.length) return
    randomFillSync(this.pool)
    this.next = 0
  }

  /** The offset in `pool` of `bytes` random bytes, within what was reserved. */
  take(bytes: number): number {
    const at = this.next
    this.next += bytes
    return at
  }

  get bytes(): Buffer {
    return this.pool
  }
}

export interface TraceResource {
  /** Resource attributes: service.name, service.version, service.instance.id, host.name, ... */
  readonly attributes: Readonly<Record<string, string>>
  /** The instrumentation scope's name and version. */
  readonly scope: { readonly name: string; readonly version: string }
}

export class TraceEncoder {
  private readonly writer = new ProtoWriter()
  private readonly ids = new Ids()
  /** The resource and scope fields, the same in every request. */
  private readonly resource: Buffer
  private readonly scope: Buffer

  /** `expected`: records a request usually holds (its first buffer's size follows). */
  constructor(
    resource: TraceResource,
    private readonly expected = 512
  ) {
    const writer = new ProtoWriter(4096)
    // ResourceSpans.resource (1): Resource { attributes (1) }
    const at = writer.open(1)
    for (const [key, value] of Object.entries(resource.attributes)) {
      const kv = writer.open(1)
      writer.stringField(1, key)
      const any = writer.open(2)
      writer.stringField(1, value)
      writer.close(any)
      writer.close(kv)
    }
    writer.close(at)
    this.resource = Buffer.from(writer.finish())
    // ScopeSpans.scope (1): InstrumentationScope { name (1), version (2) }
    writer.reset()
    const scope = writer.open(1)
    writer.stringField(1, resource.scope.name)
    writer.stringField(2, resource.scope.version)
    writer.close(scope)
    this.scope = Buffer.from(writer.finish())
  }

  /** Records in the request being written. */
  pending = 0
  private resourceSpans = 0
  private scopeSpans = 0
  /**
   * Buffers of requests that were sent, to write the next requests in. A request's buffer is some 800 KiB outside
   * V8's heap, and a fresh one per request counted towards V8's next full collection: measured under the connection
   * rate, full collections per thousand logins went from about 0.4 without telemetry to 0.66 over OTLP/HTTP.
   */
  private readonly spare: Array<Buffer> = []
  /** The buffers of the requests handed out and not yet released, by the request. */
  private readonly lent = new WeakMap<Uint8Array, Buffer>()

  /**
   * Adds a record's spans to the request being written (one is begun if none is): records are encoded as they
   * arrive, so that none waits for its batch as an object (which would carry it into the old generation).
   */
  append(record: ConnectionTrace): void {
    if (this.pending === 0) {
      const writer = this.writer
      // A buffer of its own per request: the transport holds the last one until it is sent. A login's spans take
      // ~1.1 KiB.
      writer.reset(this.expected * 1536 + 1024, this.spare.pop())
      this.resourceSpans = writer.open(1)
      writer.raw(this.resource)
      this.scopeSpans = writer.open(2)
      writer.raw(this.scope)
    }
    this.record(record)
    this.pending += 1
  }

  /** The request written so far, an ExportTraceServiceRequest; undefined when no record was added since the last. */
  take(): Uint8Array | undefined {
    if (this.pending === 0) return undefined
    this.writer.close(this.scopeSpans)
    this.writer.close(this.resourceSpans)
    this.pending = 0
    const request = this.writer.finish()
    this.lent.set(request, this.writer.buffer)
    return request
  }

  /**
   * Gives back the buffer of a request `take` returned, once nothing reads it any more (its export succeeded: a
   * failed one may still be in a transport's queue or retries), for the next requests to be written in. Two are
   * kept; a request released twice, or not from here, is ignored.
   */
  release(request: Uint8Array): void {
    const buffer = this.lent.get(request)
    if (buffer === undefined) return
    this.lent.delete(request)
    if (this.spare.length < 2) this.spare.push(buffer)
  }

  // -- attributes (Span.attributes, field 9: KeyValue { key 1, value 2: AnyValue { string 1 | int 3 } })

  private stringAttribute(key: string, value: string | undefined): void {
    if (value === undefined) return
    const writer = this.writer
    const keyBytes = keyOf(key)
    if (writer.shortStringKeyValue(9, keyBytes, value)) return
    // Short ASCII values (almost all): every length below is one byte, and the value's length is its byte length.
    const length = value.length < 0x60 && isAscii(value) ? value.length : Buffer.byteLength(value)
    const any = 1 + varintSize(length) + length
    writer.tag(9, LENGTH_DELIMITED)
    writer.varint(keyBytes.length + 1 + varintSize(any) + any)
    writer.raw(keyBytes)
    writer.tag(2, LENGTH_DELIMITED)
    writer.varint(any)
    writer.stringField(1, value)
  }

  /** A non-negative integer. */
  private intAttribute(key: string, value: number): void {
    const writer = this.writer
    const keyBytes = keyOf(key)
    const number = Math.max(0, Math.floor(value))
    const any = 1 + varintSize(number)
    writer.tag(9, LENGTH_DELIMITED)
    writer.varint(keyBytes.length + 1 + varintSize(any) + any)
    writer.raw(keyBytes)
    writer.tag(2, LENGTH_DELIMITED)
    writer.varint(any)
    writer.tag(3, VARINT)
    writer.varint(number)
  }

  /**
   * Opens a span (ScopeSpans.spans, field 2) with its ids, name, kind and times; its attributes follow, then `end`.
   * Times are the record thread's `performance.now()`; an end never reached is the connection's.
   */
  private begin(record: ConnectionTrace, traceId: number, spanId: number, parentId: number, name: string, kind: number, start: number, end: number): number {
    const writer = this.writer
    const ids = this.ids.bytes
    const span = writer.open(2)
    writer.bytesField(1, ids, traceId, traceId + 16)
    writer.bytesField(2, ids, spanId, spanId + 8)
    if (parentId >= 0) writer.bytesField(4, ids, parentId, parentId + 8)
    writer.raw(nameOf(name))
    writer.tag(6, VARINT)
    writer.varint(kind)
    writer.tag(7, 1)
    writer.fixed64Nanos(record.origin + start)
    writer.tag(8, 1)
    writer.fixed64Nanos(record.origin + (Number.isNaN(end) ? record.end : end))
    return span
  }

  /** Closes a span, with an error status when `error` says so (Status: message 2, code 3). */
  private end(span: number, error: string | undefined): void {
    const writer = this.writer
    if (error !== undefined) {
      const status = writer.open(15)
      if (error.length > 0) writer.stringField(2, error)
      writer.tag(3, VARINT)
      writer.varint(STATUS_ERROR)
      writer.close(status)
    }
    writer.close(span)
  }

  /** A child span with only string attributes (`pairs`: key, value, key, value, ...). */
  private child(record: ConnectionTrace, traceId: number, parentId: number, name: string, start: number, end: number, error: string | undefined, ...pairs: Array<string | undefined>): void {
    const span = this.begin(record, traceId, this.ids.take(8), parentId, name, KIND_INTERNAL, start, end)
    for (let index = 0; index < pairs.length; index += 2) this.stringAttribute(pairs[index]!, pairs[index + 1])
    this.end(span, error)
  }

  private record(record: ConnectionTrace): void {
    // Ids for the trace, its root and every child (at most seven, and the connect attempts); the attempts a record
    // can list are bounded by the addresses of a server.
    const attempts = Math.min(record.attempts?.length ?? 0, 1000)
    this.ids.reserve(24 + 8 * (7 + attempts))
    const traceId = this.ids.take(24)
    const rootId = traceId + 16

    const rootError =
      record.outcome === "error" || (record.outcome === "refused" && record.reason !== undefined && FAILED_REFUSALS.has(record.reason))
        ? (record.reason ?? "")
        : undefined
    const root = this.begin(record, traceId, rootId, -1, "minecraft.connection", KIND_SERVER, record.start, record.end)
    this.stringAttribute("network.transport", "tcp")
    this.stringAttribute("client.address", record.clientAddress)
    if (record.clientAddress !== undefined) this.intAttribute("client.port", record.clientPort)
    this.stringAttribute("server.address", record.domain)
    if (record.domain !== undefined) this.intAttribute("server.port", record.domainPort)
    this.stringAttribute("minecraft.handshake.next_state", record.handshake)
    if (record.protocolVersion > 0) this.intAttribute("minecraft.protocol_version", record.protocolVersion)
    this.stringAttribute("portal.server", record.server)
    this.stringAttribute("portal.proxy_mode", record.proxyMode)
    this.stringAttribute("minecraft.player.name", record.player)
    this.stringAttribute("portal.outcome", record.outcome)
    if (record.outcome === "refused") this.stringAttribute("portal.refusal.reason", record.reason)
    if (record.outcome === "error") this.stringAttribute("error.type", "connection_error")
    this.intAttribute("portal.connection.id", record.connectionId)
    this.intAttribute("portal.worker", record.worker)
    this.end(root, rootError)

    // What the handshake said is on the root span (next state, protocol version, server address).
    if (!Number.isNaN(record.handshakeEnd)) this.child(record, traceId, rootId, "minecraft.handshake", record.start, record.handshakeEnd, undefined)
    if (!Number.isNaN(record.statusStart)) {
      this.child(record, traceId, rootId, "minecraft.status", record.statusStart, record.statusEnd, undefined, "portal.status.source", record.statusSource, "portal.server.state", record.statusState)
    }
    if (!Number.isNaN(record.admissionStart)) {
      this.child(record, traceId, rootId, "portal.admission", record.admissionStart, record.admissionEnd, undefined, "portal.admission.result", record.admission)
    }
    if (!Number.isNaN(record.wakeStart)) {
      const error = record.wake === "online" ? undefined : `the server is ${record.wake ?? "not online"}`
      this.child(record, traceId, rootId, "portal.wake", record.wakeStart, record.wakeEnd, error, "portal.wake.result", record.wake)
    }
    if (!Number.isNaN(record.authenticationStart)) {
      this.child(record, traceId, rootId, "portal.authentication", record.authenticationStart, record.authenticationEnd, undefined, "portal.authentication.result", record.authentication)
    }
    for (let index = 0; index < attempts; index++) {
      const attempt = record.attempts![index]!
      const span = this.begin(record, traceId, this.ids.take(8), rootId, "portal.backend.connect", KIND_CLIENT, attempt.start, attempt.end)
      const colon = attempt.address.lastIndexOf(":")
      const port = Number(attempt.address.slice(colon + 1))
      const host = colon < 0 || !Number.isInteger(port) ? attempt.address : attempt.address.slice(0, colon).replace(/^\[(.*)\]$/, "$1")
      this.stringAttribute("server.address", host)
      if (colon >= 0 && Number.isInteger(port)) this.intAttribute("server.port", port)
      this.stringAttribute("portal.connect.result", attempt.error === undefined ? "ok" : "failed")
      this.stringAttribute("error.type", attempt.error)
      this.end(span, attempt.error)
    }
    if (!Number.isNaN(record.forwardingStart)) {
      this.child(record, traceId, rootId, "portal.forwarding", record.forwardingStart, record.forwardingEnd, undefined, "portal.forwarding.mode", record.forwarding)
    }
    if (!Number.isNaN(record.sessionStart)) {
      const span = this.begin(record, traceId, this.ids.take(8), rootId, "minecraft.session", KIND_INTERNAL, record.sessionStart, record.sessionEnd)
      this.intAttribute("portal.session.bytes_in", record.bytesIn)
      this.intAttribute("portal.session.bytes_out", record.bytesOut)
      this.stringAttribute("portal.session.closed_by", record.closedBy)
      this.stringAttribute("portal.session.detail", record.closedDetail)
      this.end(span, record.closedBy === "error" ? (record.closedDetail ?? "") : undefined)
    }
  }
}
