/**
 * The metrics in Prometheus' text exposition format, for the admin API's `GET /api/v1/metrics`: a metric reader that
 * collects only when asked (a scrape), serialized by the OpenTelemetry Prometheus exporter's serializer (metric names
 * with dots become underscores; counters end in `_total`).
 */
import { PrometheusSerializer } from "@opentelemetry/exporter-prometheus"
import { MetricReader, type MetricProducer } from "@opentelemetry/sdk-metrics"

/** Collects on demand: nothing is pushed anywhere. */
export class ScrapeReader extends MetricReader {
  private readonly serializer = new PrometheusSerializer("", false, undefined, false, true)

  constructor(producers: ReadonlyArray<MetricProducer>) {
    super({ metricProducers: [...producers] })
  }

  /** One scrape: every instrument read now, in the text format. */
  async scrape(): Promise<string> {
    const { resourceMetrics } = await this.collect()
    // The serializer turns other characters of a label name into `_` but keeps a leading digit, which Prometheus
    // refuses (and with it the whole scrape): a resource attribute such as `9lives` from OTEL_RESOURCE_ATTRIBUTES.
    const attributes = Object.fromEntries(
      Object.entries(resourceMetrics.resource.attributes).map(([key, value]) => [/^[0-9]/.test(key) ? `_${key}` : key, value])
    )
    return this.serializer.serialize({ ...resourceMetrics, resource: { ...resourceMetrics.resource, attributes } as typeof resourceMetrics.resource })
  }

  protected override onForceFlush(): Promise<void> {
    return Promise.resolve()
  }

  protected override onShutdown(): Promise<void> {
    return Promise.resolve()
  }
}
