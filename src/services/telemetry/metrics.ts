/**
 * Portal's metrics, read at export time from what the proxy already keeps: the Stats rows summed over every thread,
 * the registry's players and bytes per server, the servers' states, the balancer's health per address, the threads
 * of the data plane. Nothing is recorded on the connection path for them but Stats' plain increments (and its duration
 * buckets, which `DurationHistograms` turns into histogram points). Names, units and attributes: docs/telemetry.md.
 *
 * The observable instruments are read by one batch callback per collection, which gathers every source once.
 */
import { type Attributes, type HrTime, type Meter, ValueType } from "@opentelemetry/api"
import type { Resource } from "@opentelemetry/resources"
import {
  AggregationTemporality,
  type CollectionResult,
  DataPointType,
  type HistogramMetricData,
  type MetricProducer
} from "@opentelemetry/sdk-metrics"
import type { ServerState } from "../../schema/common.js"
import { MOTD_STATES } from "../../schema/common.js"
import { DURATION_BOUNDS_MS, type DurationHistogram, REJECT_REASONS, type StatsHistograms, type StatsTotals } from "../Stats.js"

/** Everything the instruments show, as of one collection. */
export interface MetricsReading {
  readonly totals: StatsTotals
  /** Players online per server. */
  readonly players: ReadonlyMap<string, number>
  /** Bytes relayed from and to players per server. */
  readonly bytes: ReadonlyMap<string, { readonly in: number; readonly out: number }>
  /** Every configured server's state, as a ping shows it. */
  readonly states: ReadonlyMap<string, ServerState>
  /** Every configured address: healthy or not (passive ejection and active health checks). */
  readonly health: ReadonlyArray<{ readonly server: string; readonly host: string; readonly port: number; readonly healthy: boolean }>
  /** Threads running the data plane. */
  readonly workers: number
}

/** Registers the instruments on `meter`; `read` gives what they show, once per collection. */
export const registerInstruments = (meter: Meter, read: () => Promise<MetricsReading>): void => {
  const connections = meter.createObservableCounter("portal.connections", {
    description: "Connections by how they ended: relayed (a login handed to its backend), status (a ping answered), refused, error",
    unit: "{connection}"
  })
  const accepted = meter.createObservableCounter("portal.connections.accepted", { description: "Connections accepted", unit: "{connection}" })
  const active = meter.createObservableUpDownCounter("portal.connections.active", { description: "Connections open now", unit: "{connection}" })
  const handshakes = meter.createObservableCounter("portal.handshakes", { description: "Handshakes read, by the state they ask for", unit: "{handshake}" })
  const refusals = meter.createObservableCounter("portal.refusals", { description: "Connections refused or given up on, by reason", unit: "{connection}" })
  const players = meter.createObservableUpDownCounter("portal.players.online", { description: "Players online per server", unit: "{player}" })
  const bytes = meter.createObservableCounter("portal.relay.bytes", { description: "Bytes relayed per server, from (receive) and to (transmit) players", unit: "By" })
  const cache = meter.createObservableCounter("portal.status_cache.lookups", { description: "Status cache lookups by result", unit: "{lookup}" })
  const state = meter.createObservableGauge("portal.server.state", { description: "1 for the state each server is in, 0 for the others", unit: "1" })
  const health = meter.createObservableGauge("portal.backend.healthy", { description: "1 when a backend address is healthy, else 0", unit: "1" })
  const workers = meter.createObservableGauge("portal.workers", { description: "Threads running the data plane", unit: "{thread}" })

  meter.addBatchObservableCallback(
    async (result) => {
      const reading = await read()
      const { totals } = reading
      const refused = REJECT_REASONS.reduce((sum, reason) => sum + totals.rejected[reason], 0)
      result.observe(connections, totals.logins, { "portal.outcome": "relayed" })
      result.observe(connections, totals.pings, { "portal.outcome": "status" })
      result.observe(connections, refused, { "portal.outcome": "refused" })
      result.observe(connections, totals.failed, { "portal.outcome": "error" })
      result.observe(accepted, totals.opened)
      result.observe(active, Math.max(0, totals.opened - totals.closed))
      for (const kind of ["status", "login", "legacy_status"] as const) {
        result.observe(handshakes, totals.handshakes[kind], { "minecraft.handshake.next_state": kind })
      }
      for (const reason of REJECT_REASONS) result.observe(refusals, totals.rejected[reason], { "portal.refusal.reason": reason })
      for (const [server, count] of reading.players) result.observe(players, count, { "portal.server": server })
      for (const [server, relayed] of reading.bytes) {
        result.observe(bytes, relayed.in, { "portal.server": server, "network.io.direction": "receive" })
        result.observe(bytes, relayed.out, { "portal.server": server, "network.io.direction": "transmit" })
      }
      result.observe(cache, totals.statusCache.hit, { "portal.status_cache.result": "hit" })
      result.observe(cache, totals.statusCache.miss, { "portal.status_cache.result": "miss" })
      result.observe(cache, totals.statusCache.stale, { "portal.status_cache.result": "stale" })
      for (const [server, current] of reading.states) {
        for (const each of MOTD_STATES) result.observe(state, each === current ? 1 : 0, { "portal.server": server, "portal.server.state": each })
      }
      for (const address of reading.health) {
        const attributes: Attributes = { "portal.server": address.server, "server.address": address.host, "server.port": address.port }
        result.observe(health, address.healthy ? 1 : 0, attributes)
      }
      result.observe(workers, reading.workers)
    },
    [connections, accepted, active, handshakes, refusals, players, bytes, cache, state, health, workers]
  )
}

const hrTimeOf = (epochMillis: number): HrTime => [Math.floor(epochMillis / 1000), Math.round((epochMillis % 1000) * 1e6)]

/** Seconds, as OpenTelemetry measures durations. */
const BOUNDS_S = DURATION_BOUNDS_MS.map((bound) => bound / 1000)

/**
 * The duration histograms Stats keeps in shared memory (per-thread bucket rows), as histogram metric data: a metric
 * producer each reader asks at collection time, beside the meter's instruments.
 */
export class DurationHistograms implements MetricProducer {
  private readonly startTime: HrTime

  constructor(
    private readonly resource: Resource,
    private readonly read: () => Promise<StatsHistograms>
  ) {
    this.startTime = hrTimeOf(Date.now())
  }

  async collect(): Promise<CollectionResult> {
    const histograms = await this.read()
    const now = hrTimeOf(Date.now())
    const point = (histogram: DurationHistogram, attributes: Attributes) => ({
      startTime: this.startTime,
      endTime: now,
      attributes,
      value: {
        buckets: { boundaries: BOUNDS_S, counts: [...histogram.counts] },
        sum: histogram.sum / 1000,
        count: histogram.count
      }
    })
    const metric = (name: string, description: string, points: HistogramMetricData["dataPoints"]): HistogramMetricData => ({
      descriptor: { name, description, unit: "s", valueType: ValueType.DOUBLE },
      aggregationTemporality: AggregationTemporality.CUMULATIVE,
      dataPointType: DataPointType.HISTOGRAM,
      dataPoints: points
    })
    return {
      resourceMetrics: {
        resource: this.resource,
        scopeMetrics: [
          {
            scope: { name: "portal" },
            metrics: [
              metric("portal.backend.connect.duration", "Backend connect attempts: how long each took, by result", [
                point(histograms.connectOk, { "portal.connect.result": "ok" }),
                point(histograms.connectFailed, { "portal.connect.result": "failed" })
              ]),
              metric("portal.handshake.duration", "From a connection's accept to its handshake read", [point(histograms.handshake, {})])
            ]
          }
        ]
      },
      errors: []
    }
  }
}
