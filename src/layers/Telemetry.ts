/**
 * The telemetry plugin: with `[telemetry]` enabled, OpenTelemetry traces and metrics are exported over OTLP (and the
 * metrics served to the admin API); without it no OpenTelemetry module is loaded at all (the SDK's modules are
 * imported only here, on demand) and the connection path makes no trace record.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ConfigStore } from "../services/ConfigStore.js"
import { Telemetry } from "../services/Telemetry.js"

export const TelemetryLayer = Layer.unwrapEffect(
  Effect.gen(function* () {
    // `[telemetry]` is bound at startup (a reload that changes it is reported as needing a restart).
    const telemetry = (yield* (yield* ConfigStore).get).global.telemetry
    if (telemetry === undefined || !telemetry.enabled) return Telemetry.off
    if (!telemetry.traces.enabled && !telemetry.metrics.enabled) {
      yield* Effect.logInfo("[telemetry]: traces and metrics are both disabled; nothing is exported")
      return Telemetry.off
    }
    const { makeTelemetryLayer } = yield* Effect.promise(() => import("./TelemetrySdk.js"))
    return makeTelemetryLayer(telemetry)
  })
)
