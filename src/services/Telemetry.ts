/**
 * Telemetry (`[telemetry]`): OpenTelemetry traces and metrics, exported over OTLP from the main thread. This module is
 * the port only: it loads no OpenTelemetry code. The implementation (services/telemetry/sdk/) is imported by
 * layers/Telemetry.ts on demand, and only when `[telemetry]` is enabled; without it the service is `off`: no record
 * is made on the connection path, no SDK module is in the process.
 *
 * - `dataPlane`: this thread's connection tracing (session/pipeline.ts and the phases), or undefined.
 * - `workerTracing`: what a worker thread needs to trace its connections (the sampling ratio), or undefined.
 * - `exportTraces`: the records a worker thread hands over in its batched messages.
 * - `prometheus`: the metrics in Prometheus' text format (the admin API's `/api/v1/metrics`), when metrics are on.
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { ConnectionTrace, TracingDataPlane } from "./telemetry/connectionTrace.js"

export type { ConnectionTrace, TracingDataPlane } from "./telemetry/connectionTrace.js"

export interface TelemetryService {
  readonly dataPlane: TracingDataPlane | undefined
  readonly workerTracing: { readonly samplingRatio: number } | undefined
  readonly exportTraces: (traces: ReadonlyArray<ConnectionTrace>) => void
  readonly prometheus: Effect.Effect<string> | undefined
}

export const telemetryOff: TelemetryService = {
  dataPlane: undefined,
  workerTracing: undefined,
  exportTraces: () => {},
  prometheus: undefined
}

export class Telemetry extends Context.Tag("portal/Telemetry")<Telemetry, TelemetryService>() {
  static readonly off = Layer.succeed(Telemetry, telemetryOff)
}
