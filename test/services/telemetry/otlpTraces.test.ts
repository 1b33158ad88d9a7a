/**
 * The trace encoder against the official opentelemetry-proto definitions (test/peers/otlpReceiver.ts decodes): ids,
 * parent links, nanosecond times, strings that are not short ASCII, large integers, error statuses, many attempts,
 * and requests begun anew after `take`.
 */
import { describe, expect, it } from "vitest"
import { type ConnectionTrace, newTrace } from "../../../src/services/telemetry/connectionTrace.js"
import { TraceEncoder } from "../../../src/services/telemetry/otlpTraces.js"
import { ProtoWriter } from "../../../src/services/telemetry/protoWriter.js"
import { decodeTraceRequest } from "../../peers/otlpReceiver.js"

const encoder = () =>
  new TraceEncoder({ attributes: { "service.name": "proxy", "host.name": "hôte" }, scope: { name: "portal", version: "1.2.3" } }, 4)

const login = (overrides: Partial<ConnectionTrace> = {}): ConnectionTrace => {
  const trace = newTrace(7001, 2, 100)
  return Object.assign(trace, {
    end: 5100,
    outcome: "relayed",
    clientAddress: "2001:db8::1",
    clientPort: 51234,
    handshakeEnd: 101.5,
    handshake: "login",
    protocolVersion: 769,
    domain: "play.example.com",
    domainPort: 25565,
    server: "lobby",
    proxyMode: "offline",
    admissionStart: 102,
    admissionEnd: 102.25,
    admission: "admitted",
    player: "Steve",
    attempts: [{ address: "[2001:db8::2]:25566", start: 103, end: 104, error: undefined }],
    forwardingStart: 104,
    forwardingEnd: 104.5,
    forwarding: "modern",
    sessionStart: 105,
    sessionEnd: 5100,
    bytesIn: 5_000_000_000,
    bytesOut: 12,
    closedBy: "backend_closed",
    ...overrides
  } satisfies Partial<ConnectionTrace>)
}

describe("the OTLP trace encoder", () => {
  it("writes a connection's spans as an ExportTraceServiceRequest the official definitions read", () => {
    const writer = encoder()
    const record = login()
    writer.append(record)
    const store = decodeTraceRequest(writer.take()!)
    expect(store.spans.map((span) => span.name)).toEqual([
      "minecraft.connection",
      "minecraft.handshake",
      "portal.admission",
      "portal.backend.connect",
      "portal.forwarding",
      "minecraft.session"
    ])
    const [root, ...children] = store.spans
    expect(root!.traceId).toMatch(/^[0-9a-f]{32}$/)
    expect(root!.spanId).toMatch(/^[0-9a-f]{16}$/)
    expect(root!.parentSpanId).toBe("")
    expect(root!.kind).toBe("SPAN_KIND_SERVER")
    expect(new Set(store.spans.map((span) => span.spanId)).size).toBe(6)
    for (const child of children) {
      expect(child.traceId).toBe(root!.traceId)
      expect(child.parentSpanId).toBe(root!.spanId)
    }
    expect(root!.resource).toEqual({ "service.name": "proxy", "host.name": "hôte" })
    expect(root!.attributes).toMatchObject({
      "client.address": "2001:db8::1",
      "client.port": 51234,
      "server.address": "play.example.com",
      "server.port": 25565,
      "minecraft.protocol_version": 769,
      "portal.connection.id": 7001,
      "portal.worker": 2,
      "portal.outcome": "relayed"
    })
    expect(children.find((span) => span.name === "portal.backend.connect")!.attributes).toEqual({
      "server.address": "2001:db8::2",
      "server.port": 25566,
      "portal.connect.result": "ok"
    })
    expect(children.find((span) => span.name === "minecraft.session")!.attributes).toMatchObject({
      "portal.session.bytes_in": 5_000_000_000,
      "portal.session.bytes_out": 12
    })
    // Times: the record's origin plus its thread's clock (to a few microseconds: the decoded value is a double).
    expect(root!.start).toBeCloseTo(record.origin + 100, 2)
    expect(root!.end).toBeCloseTo(record.origin + 5100, 2)
    expect(children[0]!.end).toBeCloseTo(record.origin + 101.5, 2)
  })

  it("writes strings that are long or not ASCII, error statuses, and every connect attempt", () => {
    const writer = encoder()
    const long = "x".repeat(300)
    const attempts = Array.from({ length: 40 }, (_, index) => ({ address: `10.0.0.${index}:25565`, start: 103 + index, end: 104 + index, error: "ECONNREFUSED" }))
    writer.append(login({ outcome: "refused", reason: "backend_unreachable", player: "Jörg✓", domain: long, attempts, sessionStart: Number.NaN, forwardingStart: Number.NaN }))
    const store = decodeTraceRequest(writer.take()!)
    const root = store.spans[0]!
    expect(root.attributes["minecraft.player.name"]).toBe("Jörg✓")
    expect(root.attributes["server.address"]).toBe(long)
    expect(root.attributes["portal.refusal.reason"]).toBe("backend_unreachable")
    expect(root.status).toEqual({ code: "STATUS_CODE_ERROR", message: "backend_unreachable" })
    const connects = store.spans.filter((span) => span.name === "portal.backend.connect")
    expect(connects).toHaveLength(40)
    expect(connects[39]!.attributes).toMatchObject({ "server.address": "10.0.0.39", "error.type": "ECONNREFUSED", "portal.connect.result": "failed" })
    expect(connects.every((span) => span.status.code === "STATUS_CODE_ERROR")).toBe(true)
    expect(new Set(store.spans.map((span) => span.spanId)).size).toBe(store.spans.length)
  })

  it("begins a new request after each take, and each holds only its own records", () => {
    const writer = encoder()
    expect(writer.take()).toBeUndefined()
    writer.append(login())
    writer.append(login({ player: "Alex" }))
    const first = decodeTraceRequest(writer.take()!)
    writer.append(login({ player: "Notch" }))
    const second = decodeTraceRequest(writer.take()!)
    const players = (store: ReturnType<typeof decodeTraceRequest>) =>
      store.spans.filter((span) => span.parentSpanId === "").map((span) => span.attributes["minecraft.player.name"])
    expect(players(first)).toEqual(["Steve", "Alex"])
    expect(players(second)).toEqual(["Notch"])
    // Two records, two traces.
    expect(new Set(first.spans.map((span) => span.traceId)).size).toBe(2)
  })

  it("writes the next request in a released request's buffer, and never in one still lent", () => {
    const writer = encoder()
    writer.append(login({ player: "Steve" }))
    const first = writer.take()!
    const firstCopy = Buffer.from(first)
    // Not released: the next request has a buffer of its own, and the first is left as it was.
    writer.append(login({ player: "Alex" }))
    const second = writer.take()!
    expect(second.buffer).not.toBe(first.buffer)
    expect(Buffer.from(first).equals(firstCopy)).toBe(true)
    // Released (its export succeeded): the next request is written over it.
    writer.release(first)
    writer.release(first)
    writer.append(login({ player: "Notch" }))
    const third = writer.take()!
    expect(third.buffer).toBe(first.buffer)
    expect(third.buffer).not.toBe(second.buffer)
    const players = (request: Uint8Array) =>
      decodeTraceRequest(request).spans.filter((span) => span.parentSpanId === "").map((span) => span.attributes["minecraft.player.name"])
    expect(players(second)).toEqual(["Alex"])
    expect(players(third)).toEqual(["Notch"])
    // Released twice above, kept once: the request after the third has a fresh buffer again.
    writer.append(login({ player: "Jeb" }))
    expect(writer.take()!.buffer).not.toBe(third.buffer)
    // Something take never returned is ignored.
    writer.release(new Uint8Array(8))
  })
})

describe("ProtoWriter", () => {
  it("writes nanoseconds from epoch milliseconds exactly", () => {
    for (const millis of [0, 1, 999.999999, 1_700_000_000_123.456, 4_102_444_800_000.5]) {
      const writer = new ProtoWriter(16)
      writer.fixed64Nanos(millis)
      const written = Buffer.from(writer.finish()).readBigUInt64LE(0)
      const seconds = Math.floor(millis / 1000)
      const expected = BigInt(seconds) * 1_000_000_000n + BigInt(Math.round((millis - seconds * 1000) * 1e6))
      expect(written).toBe(expected)
    }
  })

  it("grows its buffer as it writes", () => {
    const writer = new ProtoWriter(4)
    for (let index = 0; index < 1000; index++) writer.stringField(1, "abcdefgh")
    expect(writer.finish().length).toBe(10_000)
  })
})
