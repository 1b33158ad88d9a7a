/**
 * Telemetry with the OpenTelemetry SDK: loaded by layers/Telemetry.ts only when `[telemetry]` is enabled.
 *
 * - Traces: the connection path's records (services/telemetry/connectionTrace.ts), from this thread or from worker
 *   threads' messages, are queued (bounded) and exported in batches, each record a connection's spans
 *   (telemetry/otlpTraces.ts), over the SDK's OTLP transport. Pings are sampled at `sampling_ratio`, logins always.
 * - Metrics: observable instruments over the counters the proxy keeps, and the duration histograms from Stats' shared
 *   rows (telemetry/metrics.ts), pushed every `export_interval` over OTLP and served in Prometheus' text format to the
 *   admin API (telemetry/prometheus.ts).
 * - The resource: `[telemetry.resource]` service name and version, `service.instance.id` (new each start) and
 *   `host.name`, over `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (percent-decoded, as the specification
 *   says; telemetry/resourceAttributes.ts).
 * - Exports are bounded in time and in flight; failures are logged at most once a minute; at shutdown what is pending
 *   is flushed within SHUTDOWN_TIMEOUT.
 */
import * as OtelResource from "@effect/opentelemetry/Resource"
import { diag, DiagLogLevel } from "@opentelemetry/api"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { MeterProvider, type MetricReader, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Runtime from "effect/Runtime"
import { randomUUID } from "node:crypto"
import { hostname } from "node:os"
import type { ServerState } from "../schema/common.js"
import type { GlobalConfig } from "../schema/GlobalConfig.js"
import { Balancer } from "../services/Balancer.js"
import { ConfigStore } from "../services/ConfigStore.js"
import { PlayerRegistry } from "../services/PlayerRegistry.js"
import { ServerManager } from "../services/ServerManager.js"
import { Stats } from "../services/Stats.js"
import { Telemetry, type TelemetryService } from "../services/Telemetry.js"
import { type ConnectionTrace, makeTracing } from "../services/telemetry/connectionTrace.js"
import { makeExportFailures } from "../services/telemetry/exportFailures.js"
import { EXPORT_TIMEOUT_MS, metricExporter, type OtlpTarget, traceExporter } from "../services/telemetry/exporters.js"
import { DurationHistograms, type MetricsReading, registerInstruments } from "../services/telemetry/metrics.js"
import { TraceEncoder } from "../services/telemetry/otlpTraces.js"
import { ScrapeReader } from "../services/telemetry/prometheus.js"
import { parseResourceAttributes } from "../services/telemetry/resourceAttributes.js"
import { WorkerCensus } from "../services/WorkerPool.js"

type TelemetryConfig = NonNullable<GlobalConfig["telemetry"]>

/** How long a shutdown waits for pending spans and the last metrics to be exported. */
export const SHUTDOWN_TIMEOUT = Duration.seconds(5)
/** Records per export request (a login's are about 1 KiB), and how long a record may wait for a full batch. */
const TRACE_BATCH = 512
const TRACE_DELAY_MS = 1000

const describeTarget = (target: OtlpTarget) => `OTLP/${target.protocol === "grpc" ? "gRPC" : "HTTP"} to ${target.endpoint}`

export const makeTelemetryLayer = (config: TelemetryConfig) =>
  Layer.scoped(
    Telemetry,
    Effect.gen(function* () {
      const stats = yield* Stats
      const registry = yield* PlayerRegistry
      const manager = yield* ServerManager
      const balancer = yield* Balancer
      const store = yield* ConfigStore
      const census = yield* Effect.serviceOption(WorkerCensus)
      const runtime = yield* Effect.runtime<never>()
      const runFork = Runtime.runFork(runtime)
      const runPromise = Runtime.runPromise(runtime)

      const target: OtlpTarget | undefined = config.endpoint === undefined ? undefined : { endpoint: config.endpoint, protocol: config.protocol }
      const clock = yield* Effect.clock
      const failures = makeExportFailures(config.endpoint ?? "(no endpoint)", runFork, () => clock.unsafeCurrentTimeMillis())
      // The SDK reports some failures only to its diagnostic logger (a metrics export that timed out, an instrument
      // whose reading failed): they go to the same once-a-minute warning as the exports' own.
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          const ignore = () => {}
          diag.setLogger(
            {
              error: (message: string) => failures.failed(/metric/i.test(message) ? "metrics" : "telemetry", message),
              warn: ignore,
              info: ignore,
              debug: ignore,
              verbose: ignore
            },
            DiagLogLevel.ERROR
          )
        }),
        () => Effect.sync(() => diag.disable())
      )
      // The resource: OTEL_RESOURCE_ATTRIBUTES (percent-decoded), OTEL_SERVICE_NAME, then the configuration's own names.
      const fromEnv = parseResourceAttributes(yield* Config.string("OTEL_RESOURCE_ATTRIBUTES").pipe(Config.withDefault(""), Effect.orElseSucceed(() => "")))
      if (fromEnv.skipped.length > 0) {
        yield* Effect.logWarning(`telemetry: OTEL_RESOURCE_ATTRIBUTES: left out what is not key=value with percent-encoding: ${fromEnv.skipped.join(", ")}`)
      }
      const serviceName = yield* Config.option(Config.string("OTEL_SERVICE_NAME")).pipe(Effect.orElseSucceed(() => Option.none<string>()))
      const resource = resourceFromAttributes({
        ...fromEnv.attributes,
        ...Option.match(serviceName, { onNone: () => ({}), onSome: (name) => ({ "service.name": name }) }),
        ...OtelResource.configToAttributes({
          serviceName: config.resource.service_name,
          serviceVersion: config.resource.service_version,
          attributes: { "service.instance.id": randomUUID(), "host.name": hostname() }
        })
      })

      // Traces: only where they go somewhere.
      let tracing: Pick<TelemetryService, "dataPlane" | "workerTracing" | "exportTraces"> = {
        dataPlane: undefined,
        workerTracing: undefined,
        exportTraces: () => {}
      }
      if (config.traces.enabled && target !== undefined) {
        const attributes: Record<string, string> = {}
        for (const [key, value] of Object.entries(resource.attributes)) if (value !== undefined) attributes[key] = String(value)
        const exporter = traceExporter(target, failures)
        const encoder = new TraceEncoder({ attributes, scope: { name: "portal", version: config.resource.service_version } }, TRACE_BATCH)

        // Records are encoded as they arrive; a request goes when it holds a batch, or after a second.
        let timer: NodeJS.Timeout | undefined
        const flush = () => {
          clearTimeout(timer)
          timer = undefined
          const request = encoder.take()
          // Bounded by the exporter: beyond its exports in flight a request is dropped, and the failure reported
          // (at most once a minute). A failed request is not retried here. A sent one's buffer is written again.
          if (request !== undefined) exporter.export(request, (result) => result.code === 0 && encoder.release(request))
        }
        const enqueue = (record: ConnectionTrace) => {
          encoder.append(record)
          if (encoder.pending >= TRACE_BATCH) flush()
          else if (timer === undefined) timer = setTimeout(flush, TRACE_DELAY_MS).unref()
        }
        // At shutdown: what is pending goes, and the exports in flight are waited for (bounded).
        yield* Effect.addFinalizer(() =>
          Effect.sync(flush).pipe(
            Effect.zipRight(Effect.promise(() => exporter.forceFlush().then(() => exporter.shutdown()))),
            Effect.ignore,
            Effect.interruptible,
            Effect.timeoutOption(SHUTDOWN_TIMEOUT)
          )
        )
        tracing = {
          dataPlane: makeTracing(config.traces.sampling_ratio, 0, enqueue),
          workerTracing: { samplingRatio: config.traces.sampling_ratio },
          exportTraces: (records) => {
            for (const record of records) enqueue(record)
          }
        }
      }

      // Metrics: pushed when there is an endpoint, always served to the admin API.
      let prometheus: TelemetryService["prometheus"] = undefined
      if (config.metrics.enabled) {
        const workers = Option.match(census, { onNone: () => Effect.succeed(1), onSome: (ref) => Effect.map(Ref.get(ref), (list) => list.length) })
        const reading = Effect.gen(function* () {
          const snapshot = yield* store.get
          const states = new Map<string, ServerState>()
          const health: Array<MetricsReading["health"][number]> = []
          for (const server of snapshot.servers.values()) {
            const state = yield* manager.stateOf(server.id)
            states.set(server.id, state === "online" && !(yield* balancer.anyHealthy(server)) ? "unreachable" : state)
            const addresses = yield* balancer.status(server)
            server.config.addresses.forEach((address, index) => {
              const status = addresses[index]
              health.push({
                server: server.id,
                host: address.host,
                port: address.port,
                healthy: status !== undefined && status.healthy && status.ejectedUntil === undefined
              })
            })
          }
          // Every configured server has a count, 0 included (the registry lists only servers with players).
          const counts = yield* registry.counts
          const players = new Map<string, number>()
          for (const id of snapshot.servers.keys()) players.set(id, counts.get(id) ?? 0)
          for (const [id, count] of counts) players.set(id, count)
          return {
            totals: yield* stats.totals,
            players,
            bytes: yield* registry.bytesByServer,
            states,
            health,
            workers: yield* workers
          } satisfies MetricsReading
        })
        const histograms = new DurationHistograms(resource, () => runPromise(stats.histograms))
        const scrape = new ScrapeReader([histograms])
        const readers: Array<MetricReader> = [scrape]
        if (target !== undefined) {
          const interval = Math.max(1, Duration.toMillis(config.metrics.export_interval))
          readers.push(
            new PeriodicExportingMetricReader({
              exporter: metricExporter(target, failures),
              exportIntervalMillis: interval,
              exportTimeoutMillis: Math.min(interval, EXPORT_TIMEOUT_MS),
              metricProducers: [histograms]
            })
          )
        }
        const provider = yield* Effect.acquireRelease(
          Effect.sync(() => new MeterProvider({ resource, readers })),
          // The periodic reader exports once more as it shuts down: the last counts are not lost.
          (provider) => Effect.promise(() => provider.shutdown()).pipe(Effect.ignore, Effect.interruptible, Effect.timeoutOption(SHUTDOWN_TIMEOUT))
        )
        registerInstruments(provider.getMeter("portal", config.resource.service_version), () => runPromise(reading))
        prometheus = Effect.promise(() => scrape.scrape())
      }

      const what = [
        tracing.dataPlane === undefined ? undefined : `traces (pings sampled at ${config.traces.sampling_ratio}, every login)`,
        config.metrics.enabled && target !== undefined ? `metrics (every ${Duration.format(config.metrics.export_interval)})` : undefined
      ].filter((part) => part !== undefined)
      if (target === undefined) {
        yield* Effect.logInfo(
          `telemetry: no endpoint, nothing is pushed${config.metrics.enabled ? "; metrics are served at /api/v1/metrics when the admin API runs" : ""}`
        )
      } else if (what.length > 0) {
        yield* Effect.logInfo(`telemetry: exporting ${what.join(" and ")} over ${describeTarget(target)}`)
      }
      return Telemetry.of({ ...tracing, prometheus })
    })
  )
