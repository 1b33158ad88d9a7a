/**
 * A connection's record (connectionTrace.ts) as spans: a root span for the connection, a child for each phase it went
 * through, all with the times the data plane took (explicit start and end times: the spans are made after the fact,
 * on the main thread, whichever thread served the connection). Names and attributes: docs/telemetry.md.
 */
import { type Attributes, type Context, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, trace as traceApi, type Tracer } from "@opentelemetry/api"
import type { ConnectionTrace } from "./connectionTrace.js"

/** Refusals that mean Portal could not serve the player (rather than chose not to): their spans are errors. */
const FAILED_REFUSALS = new Set(["backend_unreachable", "unavailable"])

/**
 * One span from `start` to `end` (times of the record's thread; an end never reached is the connection's), under
 * `parent`; `error` sets its status.
 */
const child = (
  tracer: Tracer,
  parent: Context,
  record: ConnectionTrace,
  name: string,
  start: number,
  end: number,
  attributes: Attributes,
  error?: string,
  kind: SpanKind = SpanKind.INTERNAL
): void => {
  const span: Span = tracer.startSpan(name, { kind, startTime: record.origin + start, attributes }, parent)
  if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error })
  span.end(record.origin + (Number.isNaN(end) ? record.end : end))
}

const set = (attributes: Attributes, key: string, value: string | number | undefined): void => {
  if (value !== undefined) attributes[key] = value
}

const splitHostPort = (address: string): { readonly host: string; readonly port: number | undefined } => {
  const colon = address.lastIndexOf(":")
  if (colon < 0) return { host: address, port: undefined }
  const port = Number(address.slice(colon + 1))
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, "$1")
  return Number.isInteger(port) ? { host, port } : { host: address, port: undefined }
}

/** Writes the spans of one finished connection through `tracer`. */
export const writeSpans = (tracer: Tracer, record: ConnectionTrace): void => {
  const root: Attributes = {
    "network.transport": "tcp",
    "portal.connection.id": record.connectionId,
    "portal.worker": record.worker,
    "portal.outcome": record.outcome
  }
  set(root, "client.address", record.clientAddress)
  if (record.clientAddress !== undefined) root["client.port"] = record.clientPort
  set(root, "server.address", record.domain)
  if (record.domain !== undefined) root["server.port"] = record.domainPort
  set(root, "minecraft.handshake.next_state", record.handshake)
  if (record.protocolVersion > 0) root["minecraft.protocol_version"] = record.protocolVersion
  set(root, "portal.server", record.server)
  set(root, "portal.proxy_mode", record.proxyMode)
  set(root, "minecraft.player.name", record.player)
  if (record.outcome === "refused") set(root, "portal.refusal.reason", record.reason)
  if (record.outcome === "error") set(root, "error.type", "connection_error")
  const span = tracer.startSpan("minecraft.connection", { kind: SpanKind.SERVER, startTime: record.origin + record.start, attributes: root, root: true }, ROOT_CONTEXT)
  if (record.outcome === "error" || (record.outcome === "refused" && record.reason !== undefined && FAILED_REFUSALS.has(record.reason))) {
    span.setStatus(record.reason === undefined ? { code: SpanStatusCode.ERROR } : { code: SpanStatusCode.ERROR, message: record.reason })
  }
  const parent = traceApi.setSpan(ROOT_CONTEXT, span)

  if (!Number.isNaN(record.handshakeEnd)) {
    const attributes: Attributes = {}
    set(attributes, "minecraft.handshake.next_state", record.handshake)
    if (record.protocolVersion > 0) attributes["minecraft.protocol_version"] = record.protocolVersion
    child(tracer, parent, record, "minecraft.handshake", record.start, record.handshakeEnd, attributes)
  }
  if (!Number.isNaN(record.statusStart)) {
    const attributes: Attributes = {}
    set(attributes, "portal.status.source", record.statusSource)
    set(attributes, "portal.server.state", record.statusState)
    child(tracer, parent, record, "minecraft.status", record.statusStart, record.statusEnd, attributes)
  }
  if (!Number.isNaN(record.admissionStart)) {
    const attributes: Attributes = {}
    set(attributes, "portal.admission.result", record.admission)
    set(attributes, "minecraft.player.name", record.player)
    child(tracer, parent, record, "portal.admission", record.admissionStart, record.admissionEnd, attributes)
  }
  if (!Number.isNaN(record.wakeStart)) {
    const attributes: Attributes = {}
    set(attributes, "portal.wake.result", record.wake)
    child(tracer, parent, record, "portal.wake", record.wakeStart, record.wakeEnd, attributes, record.wake === "online" ? undefined : `the server is ${record.wake ?? "not online"}`)
  }
  if (!Number.isNaN(record.authenticationStart)) {
    const attributes: Attributes = {}
    set(attributes, "portal.authentication.result", record.authentication)
    child(tracer, parent, record, "portal.authentication", record.authenticationStart, record.authenticationEnd, attributes)
  }
  for (const attempt of record.attempts ?? []) {
    const { host, port } = splitHostPort(attempt.address)
    const attributes: Attributes = {
      "server.address": host,
      "network.transport": "tcp",
      "portal.connect.result": attempt.error === undefined ? "ok" : "failed"
    }
    if (port !== undefined) attributes["server.port"] = port
    if (attempt.error !== undefined) attributes["error.type"] = attempt.error
    child(tracer, parent, record, "portal.backend.connect", attempt.start, attempt.end, attributes, attempt.error, SpanKind.CLIENT)
  }
  if (!Number.isNaN(record.forwardingStart)) {
    const attributes: Attributes = {}
    set(attributes, "portal.forwarding.mode", record.forwarding)
    child(tracer, parent, record, "portal.forwarding", record.forwardingStart, record.forwardingEnd, attributes)
  }
  if (!Number.isNaN(record.sessionStart)) {
    const attributes: Attributes = {
      "portal.session.bytes_in": record.bytesIn,
      "portal.session.bytes_out": record.bytesOut
    }
    set(attributes, "portal.session.closed_by", record.closedBy)
    set(attributes, "portal.session.detail", record.closedDetail)
    child(tracer, parent, record, "minecraft.session", record.sessionStart, record.sessionEnd, attributes, record.closedBy === "error" ? (record.closedDetail ?? "error") : undefined)
  }
  span.end(record.origin + record.end)
}
