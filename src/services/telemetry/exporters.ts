/**
 * The OTLP exporters of `[telemetry]`: gRPC (`protocol = "grpc"`) or HTTP with protobuf bodies (`"http"`), to
 * `endpoint`. Metrics go through the SDK's metric exporters; connection traces through the same OTLP transport the
 * SDK's trace exporters use (its export delegate: the gRPC or HTTP client, the time limit per export, the limit on
 * exports in flight beyond which a batch is dropped), with Portal's own encoding of the request (otlpTraces.ts says
 * why). Each reports its failures to ExportFailures; nothing here is ever waited for by a connection.
 */
import { OTLPMetricExporter as GrpcMetricExporter } from "@opentelemetry/exporter-metrics-otlp-grpc"
import { OTLPMetricExporter as HttpMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto"
import { OTLPExporterBase } from "@opentelemetry/otlp-exporter-base"
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from "@opentelemetry/otlp-exporter-base/node-http"
import { convertLegacyOtlpGrpcOptions, createOtlpGrpcExportDelegate } from "@opentelemetry/otlp-grpc-exporter-base"
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer"
import type { PushMetricExporter } from "@opentelemetry/sdk-metrics"
import type { ExportFailures } from "./exportFailures.js"

/** How long one export may take before it counts as failed (ms). */
export const EXPORT_TIMEOUT_MS = 5_000
/** Exports in flight at once; a batch beyond them is dropped (and counted as a failure). */
const CONCURRENCY_LIMIT = 8

export interface OtlpTarget {
  readonly endpoint: string
  readonly protocol: "grpc" | "http"
}

/** `grpc://` and `grpcs://` name the same thing as `http://` and `https://` to the exporters. */
const normalise = (endpoint: string): string => endpoint.replace(/^grpc(s?):\/\//i, "http$1://").replace(/\/+$/, "")

/** The URL of one signal: gRPC takes the endpoint itself; OTLP/HTTP appends the signal's path (`/v1/traces`). */
export const signalUrl = (target: OtlpTarget, signal: "traces" | "metrics"): string =>
  target.protocol === "grpc" ? normalise(target.endpoint) : `${normalise(target.endpoint)}/v1/${signal}`

/** An export's result as the SDK reports it (`code` 0: success). */
interface ExportResult {
  readonly code: number
  readonly error?: Error
}

/** Reports every failed export of `exporter` (its results still go to whoever exported). */
const reportingFailures = <E extends { export: (items: any, done: (result: ExportResult) => void) => void }>(
  exporter: E,
  what: string,
  failures: ExportFailures
): E => {
  const original = exporter.export.bind(exporter)
  exporter.export = (items, done) =>
    original(items, (result) => {
      if (result.code !== 0) failures.failed(what, result.error?.message ?? "unknown error")
      done(result)
    })
  return exporter
}

export const metricExporter = (target: OtlpTarget, failures: ExportFailures): PushMetricExporter => {
  const config = { url: signalUrl(target, "metrics"), timeoutMillis: EXPORT_TIMEOUT_MS, concurrencyLimit: CONCURRENCY_LIMIT }
  return reportingFailures(target.protocol === "grpc" ? new GrpcMetricExporter(config) : new HttpMetricExporter(config), "metrics", failures)
}

/** Connection traces: each export is one request, already encoded (otlpTraces.ts). */
export type TraceExporter = OTLPExporterBase<Uint8Array>

export const traceExporter = (target: OtlpTarget, failures: ExportFailures): TraceExporter => {
  const config = { url: signalUrl(target, "traces"), timeoutMillis: EXPORT_TIMEOUT_MS, concurrencyLimit: CONCURRENCY_LIMIT }
  const serializer = {
    serializeRequest: (request: Uint8Array) => request,
    deserializeResponse: (data: Uint8Array) => ProtobufTraceSerializer.deserializeResponse(data)
  }
  // Counts for the SDK's own exporter metrics, which are not enabled here.
  const counting = { name: "span" as const, countItems: () => 1 }
  const delegate =
    target.protocol === "grpc"
      ? createOtlpGrpcExportDelegate(
          convertLegacyOtlpGrpcOptions(config, "TRACES"),
          serializer,
          "portal_connection_trace_exporter",
          counting,
          undefined,
          "TraceExportService",
          "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
        )
      : createOtlpHttpExportDelegate(
          convertLegacyHttpOptions(config, "TRACES", "v1/traces", { "Content-Type": "application/x-protobuf" }),
          serializer,
          "portal_connection_trace_exporter",
          counting,
          undefined
        )
  return reportingFailures(new OTLPExporterBase(delegate), "traces", failures)
}
