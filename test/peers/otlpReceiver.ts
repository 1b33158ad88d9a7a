/**
 * Real OTLP receivers on loopback, as a collector would be: OTLP/gRPC (@grpc/grpc-js serving the official
 * TraceService and MetricsService) and OTLP/HTTP (protobuf bodies on /v1/traces and /v1/metrics). Both decode with the
 * official protobuf definitions of opentelemetry-proto, as shipped in the npm package
 * @opentelemetry/otlp-grpc-exporter-base@0.38.0 (`build/protos/`, installed here under the alias
 * `opentelemetry-proto-files`), loaded with @grpc/proto-loader: nothing of Portal's own code decodes what Portal sent.
 */
import * as grpc from "@grpc/grpc-js"
import * as protoLoader from "@grpc/proto-loader"
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { createRequire } from "node:module"
import * as path from "node:path"

const require = createRequire(import.meta.url)
const PROTOS = path.join(path.dirname(require.resolve("opentelemetry-proto-files/package.json")), "build", "protos")

const definition = protoLoader.loadSync(
  ["opentelemetry/proto/collector/trace/v1/trace_service.proto", "opentelemetry/proto/collector/metrics/v1/metrics_service.proto"],
  { includeDirs: [PROTOS], keepCase: true, longs: String, enums: String, defaults: true, oneofs: true }
)
// The loaded definition is untyped (a tree of namespaces): reach the two services by their full names.
const loaded = grpc.loadPackageDefinition(definition) as any
const TraceService: grpc.ServiceClientConstructor = loaded.opentelemetry.proto.collector.trace.v1.TraceService
const MetricsService: grpc.ServiceClientConstructor = loaded.opentelemetry.proto.collector.metrics.v1.MetricsService
const decodeTraces = TraceService.service.Export!.requestDeserialize
const decodeMetrics = MetricsService.service.Export!.requestDeserialize
const encodeTraceResponse = TraceService.service.Export!.responseSerialize
const encodeMetricsResponse = MetricsService.service.Export!.responseSerialize

export type Attributes = Record<string, unknown>

export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  /** Empty for a root span. */
  readonly parentSpanId: string
  readonly name: string
  /** SPAN_KIND_SERVER, SPAN_KIND_INTERNAL, ... */
  readonly kind: string
  /** Epoch milliseconds. */
  readonly start: number
  readonly end: number
  readonly attributes: Attributes
  readonly status: { readonly code: string; readonly message: string }
  readonly resource: Attributes
}

export interface ReceivedPoint {
  readonly metric: string
  readonly unit: string
  readonly type: "sum" | "gauge" | "histogram"
  readonly monotonic: boolean
  readonly attributes: Attributes
  /** Sums and gauges. */
  readonly value: number
  /** Histograms. */
  readonly histogram: { readonly count: number; readonly sum: number; readonly bounds: ReadonlyArray<number>; readonly counts: ReadonlyArray<number> } | undefined
  readonly resource: Attributes
}

/** An AnyValue as a plain value (`oneofs: true` names the field that is set in `value`). */
const valueOf = (any: any): unknown => {
  if (any === null || any === undefined) return undefined
  switch (any.value) {
    case "string_value":
      return any.string_value
    case "bool_value":
      return any.bool_value
    case "int_value":
      return Number(any.int_value)
    case "double_value":
      return any.double_value
    case "array_value":
      return (any.array_value.values ?? []).map(valueOf)
    default:
      return undefined
  }
}

const attributesOf = (list: ReadonlyArray<any> | undefined): Attributes =>
  Object.fromEntries((list ?? []).map((entry: any) => [entry.key, valueOf(entry.value)]))

const millis = (nanos: string): number => Number(BigInt(nanos) / 1000n) / 1000

const hex = (bytes: Buffer | Uint8Array | undefined): string => (bytes === undefined ? "" : Buffer.from(bytes).toString("hex"))

/** Decodes an ExportTraceServiceRequest with the official definitions (as the receivers do). */
export const decodeTraceRequest = (bytes: Uint8Array): OtlpStore => {
  const store = new OtlpStore()
  store.addTraces(decodeTraces(Buffer.from(bytes)))
  return store
}

export class OtlpStore {
  readonly spans: Array<ReceivedSpan> = []
  readonly points: Array<ReceivedPoint> = []
  /** Export requests received, per signal. */
  readonly requests = { traces: 0, metrics: 0 }

  addTraces(request: any): void {
    this.requests.traces += 1
    for (const resourceSpans of request.resource_spans ?? []) {
      const resource = attributesOf(resourceSpans.resource?.attributes)
      for (const scope of resourceSpans.scope_spans ?? []) {
        for (const span of scope.spans ?? []) {
          this.spans.push({
            traceId: hex(span.trace_id),
            spanId: hex(span.span_id),
            parentSpanId: hex(span.parent_span_id),
            name: span.name,
            kind: span.kind,
            start: millis(span.start_time_unix_nano),
            end: millis(span.end_time_unix_nano),
            attributes: attributesOf(span.attributes),
            status: { code: span.status?.code ?? "STATUS_CODE_UNSET", message: span.status?.message ?? "" },
            resource
          })
        }
      }
    }
  }

  addMetrics(request: any): void {
    this.requests.metrics += 1
    for (const resourceMetrics of request.resource_metrics ?? []) {
      const resource = attributesOf(resourceMetrics.resource?.attributes)
      for (const scope of resourceMetrics.scope_metrics ?? []) {
        for (const metric of scope.metrics ?? []) {
          const base = { metric: metric.name, unit: metric.unit, resource }
          const number = (point: any) => (point.value === "as_int" ? Number(point.as_int) : point.as_double)
          if (metric.data === "sum") {
            for (const point of metric.sum.data_points ?? []) {
              this.points.push({ ...base, type: "sum", monotonic: metric.sum.is_monotonic, attributes: attributesOf(point.attributes), value: number(point), histogram: undefined })
            }
          } else if (metric.data === "gauge") {
            for (const point of metric.gauge.data_points ?? []) {
              this.points.push({ ...base, type: "gauge", monotonic: false, attributes: attributesOf(point.attributes), value: number(point), histogram: undefined })
            }
          } else if (metric.data === "histogram") {
            for (const point of metric.histogram.data_points ?? []) {
              this.points.push({
                ...base,
                type: "histogram",
                monotonic: true,
                attributes: attributesOf(point.attributes),
                value: Number.NaN,
                histogram: {
                  count: Number(point.count),
                  sum: point.sum ?? 0,
                  bounds: point.explicit_bounds ?? [],
                  counts: (point.bucket_counts ?? []).map(Number)
                }
              })
            }
          }
        }
      }
    }
  }

  /** The last point of `metric` whose attributes include `match`. */
  latest(metric: string, match: Attributes = {}): ReceivedPoint | undefined {
    for (let index = this.points.length - 1; index >= 0; index--) {
      const point = this.points[index]!
      if (point.metric === metric && Object.entries(match).every(([key, value]) => point.attributes[key] === value)) return point
    }
    return undefined
  }
}

export interface OtlpReceiver {
  /** The endpoint Portal is configured with. */
  readonly endpoint: string
  readonly protocol: "grpc" | "http"
  readonly store: OtlpStore
  stop(): Promise<void>
}

/** OTLP/gRPC on 127.0.0.1 (a free port, or `port`). */
export const startGrpcReceiver = async (port = 0): Promise<OtlpReceiver> => {
  const store = new OtlpStore()
  const server = new grpc.Server()
  server.addService(TraceService.service, {
    Export: (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
      store.addTraces(call.request)
      callback(null, {})
    }
  })
  server.addService(MetricsService.service, {
    Export: (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
      store.addMetrics(call.request)
      callback(null, {})
    }
  })
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (error, actual) => (error ? reject(error) : resolve(actual)))
  )
  return {
    endpoint: `http://127.0.0.1:${bound}`,
    protocol: "grpc",
    store,
    stop: () =>
      new Promise<void>((resolve) => {
        server.forceShutdown()
        resolve()
      })
  }
}

const bodyOf = (request: IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => resolve(Buffer.concat(chunks)))
    request.on("error", reject)
  })

/** OTLP/HTTP with protobuf bodies on 127.0.0.1 (a free port, or `port`). */
export const startHttpReceiver = async (port = 0): Promise<OtlpReceiver> => {
  const store = new OtlpStore()
  const server: Server = createServer((request, response) => {
    void bodyOf(request).then((body) => {
      const type = request.headers["content-type"] ?? ""
      if (request.method !== "POST" || type !== "application/x-protobuf") {
        response.writeHead(415).end()
        return
      }
      if (request.url === "/v1/traces") {
        store.addTraces(decodeTraces(body))
        response.writeHead(200, { "content-type": "application/x-protobuf" }).end(encodeTraceResponse({}))
      } else if (request.url === "/v1/metrics") {
        store.addMetrics(decodeMetrics(body))
        response.writeHead(200, { "content-type": "application/x-protobuf" }).end(encodeMetricsResponse({}))
      } else {
        response.writeHead(404).end()
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve))
  const bound = (server.address() as AddressInfo).port
  return {
    endpoint: `http://127.0.0.1:${bound}`,
    protocol: "http",
    store,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
