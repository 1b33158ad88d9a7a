// @ts-check
/**
 * Turns the samples of every round into the Markdown report: medians per target, ratios to the direct connection
 * and to HAProxy, and the targets with PASS or MISS.
 */

const TARGETS = /** @type {const} */ (["direct", "haproxy", "passthrough", "zero_copy", "offline", "client_only"])
const PORTAL = /** @type {const} */ (["passthrough", "zero_copy"])
/** Portal's packet modes: measured by the native game load and the connection rate only. */
const PACKET = /** @type {const} */ (["offline", "client_only"])

/**
 * @typedef {typeof TARGETS[number]} TargetName
 * @typedef {TargetName | "haproxy_splice" | "passthrough_telemetry" | "passthrough_telemetry_http" | "passthrough_telemetry_off"} SampleKey
 *   haproxy_splice: HAProxy splicing, measured in the bulk scenario only; passthrough_telemetry(_http): passthrough with
 *   [telemetry] on, exporting over OTLP/gRPC (over OTLP/HTTP), and passthrough_telemetry_off: the same without it, in
 *   the telemetry comparison only (`telemetry`: the connection rate, each window in a process started for it)
 * @typedef {Record<string, number | undefined | string>} Sample
 * @typedef {Partial<Record<SampleKey, Array<Sample | undefined>>>} ByTarget samples indexed by round
 * @typedef {{ bulk: ByTarget, bulkUnpinned: ByTarget, game: ByTarget, gameNative: ByTarget, rate: ByTarget, telemetry: ByTarget, status: ByTarget, statusRelayed: ByTarget, memory: ByTarget, coresRate: ByKey, coresStatus: ByKey, coresBulk: ByKey, startup: ByKey, flood: ByKey }} Results
 * @typedef {Record<string, Array<Sample | undefined>>} ByKey samples indexed by round, by a key of the scenario
 *   The multi-core scenario's and the flood's samples are keyed by `nbthread_N` (HAProxy) and `workers_N` (Portal).
 */

/** @param {Array<number>} values */
const median = (values) => {
  if (values.length === 0) return undefined
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] : (/** @type {number} */ (sorted[middle - 1]) + /** @type {number} */ (sorted[middle])) / 2
}

/**
 * @param {ByTarget} byTarget @param {SampleKey} target @param {string} field
 * @returns {Array<number>}
 */
const values = (byTarget, target, field) =>
  (byTarget[target] ?? []).flatMap((sample) => {
    const value = sample?.[field]
    return typeof value === "number" && Number.isFinite(value) ? [value] : []
  })

/**
 * Median over rounds of (target - direct), each round paired with the direct measurement of the same round.
 * @param {ByTarget} byTarget @param {TargetName} target @param {string} field
 */
const addedOverDirect = (byTarget, target, field) => {
  const direct = byTarget.direct ?? []
  const differences = (byTarget[target] ?? []).flatMap((sample, round) => {
    const mine = sample?.[field]
    const base = direct[round]?.[field]
    return typeof mine === "number" && typeof base === "number" ? [mine - base] : []
  })
  return median(differences)
}

/**
 * @typedef {object} Row
 * @property {string} scenario
 * @property {string} metric
 * @property {(target: TargetName) => number | undefined} value
 * @property {(value: number) => string} format
 * @property {ReadonlyArray<TargetName>} [measured] targets this row has values for (all when absent)
 * @property {boolean} [noDirectRatio]
 * @property {"haproxySplice"} [needs] the HAProxy column is n/a without this HAProxy
 */

/**
 * @typedef {{ haproxy: boolean, haproxySplice?: boolean, nativeGame?: boolean, manyWorkers?: number }} Available which HAProxy
 *   processes ran, whether the game scenario also ran with the native load, and how many threads the multi-core
 *   scenario gave its second HAProxy and Portal
 */

const fixed = (/** @type {number} */ digits) => (/** @type {number} */ value) =>
  value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })

/**
 * A bulk metric with HAProxy splicing in the HAProxy column.
 * @param {ByTarget} bulk @param {string} field
 */
const spliceReference = (bulk, field) => (/** @type {TargetName} */ target) =>
  median(values(bulk, target === "haproxy" ? "haproxy_splice" : target, field))

/**
 * The game scenario's rows for one load.
 * @param {string} scenario @param {ByTarget} game @returns {Array<Row>}
 */
const gameRows = (scenario, game) => {
  const med = (/** @type {string} */ field) => (/** @type {TargetName} */ target) => median(values(game, target, field))
  const proxies = /** @type {const} */ (["haproxy", "passthrough", "zero_copy", "offline", "client_only"])
  /** @param {string} field */
  const added = (field) => (/** @type {TargetName} */ target) => addedOverDirect(game, target, field)
  return [
    { scenario, metric: "round trip p50 (ms)", value: med("p50"), format: fixed(3) },
    { scenario, metric: "round trip p99 (ms)", value: med("p99"), format: fixed(3) },
    { scenario, metric: "added p50 over direct (ms)", value: added("p50"), format: fixed(3), measured: proxies, noDirectRatio: true },
    { scenario, metric: "added p99 over direct (ms)", value: added("p99"), format: fixed(3), measured: proxies, noDirectRatio: true },
    { scenario, metric: "proxy CPU (% of a core)", value: med("cpuPercent"), format: fixed(1), measured: proxies }
  ]
}

/** @param {Results} results @returns {Array<Row>} */
const rows = (results) => {
  const med = (/** @type {ByTarget} */ byTarget, /** @type {string} */ field) => (/** @type {TargetName} */ target) =>
    median(values(byTarget, target, field))
  const proxies = /** @type {const} */ (["haproxy", "passthrough", "zero_copy"])
  /**
   * A row of the telemetry comparison, in the passthrough column.
   * @param {string} metric @param {SampleKey} key @param {string} field @param {(value: number) => string} format
   * @returns {Row}
   */
  const telemetryRow = (metric, key, field, format) => ({
    scenario: "3. Connection rate",
    metric,
    value: () => median(values(results.telemetry, key, field)),
    format,
    measured: ["passthrough"]
  })
  return [
    { scenario: "1. Bulk relay", metric: "throughput, both ways (MiB/s)", value: med(results.bulk, "mibPerSecond"), format: fixed(0) },
    { scenario: "1. Bulk relay", metric: "proxy CPU per GiB (s)", value: med(results.bulk, "cpuPerGiB"), format: fixed(3), measured: proxies },
    // Reference rows: the HAProxy column is HAProxy splicing; Portal's columns repeat the rows above.
    {
      scenario: "1. Bulk relay",
      metric: "throughput, HAProxy splicing (MiB/s)",
      value: spliceReference(results.bulk, "mibPerSecond"),
      format: fixed(0),
      measured: proxies,
      needs: "haproxySplice"
    },
    {
      scenario: "1. Bulk relay",
      metric: "proxy CPU per GiB, HAProxy splicing (s)",
      value: spliceReference(results.bulk, "cpuPerGiB"),
      format: fixed(3),
      measured: proxies,
      needs: "haproxySplice"
    },
    // Reference rows: the bulk relay again with nothing pinned, proxies and load sharing every CPU.
    { scenario: "1. Bulk relay", metric: "throughput, nothing pinned (MiB/s)", value: med(results.bulkUnpinned, "mibPerSecond"), format: fixed(0) },
    {
      scenario: "1. Bulk relay",
      metric: "proxy CPU per GiB, nothing pinned (s)",
      value: med(results.bulkUnpinned, "cpuPerGiB"),
      format: fixed(3),
      measured: proxies
    },
    {
      scenario: "1. Bulk relay",
      metric: "throughput, nothing pinned, HAProxy splicing (MiB/s)",
      value: spliceReference(results.bulkUnpinned, "mibPerSecond"),
      format: fixed(0),
      measured: proxies,
      needs: "haproxySplice"
    },
    ...gameRows("2. Game-shaped load", results.game),
    ...gameRows("2. Game-shaped load, native load", results.gameNative),
    { scenario: "3. Connection rate", metric: "logins per second", value: med(results.rate, "perSecond"), format: fixed(0) },
    {
      scenario: "3. Connection rate",
      metric: "proxy CPU (% of a core)",
      value: med(results.rate, "cpuPercent"),
      format: fixed(1),
      measured: [...proxies, ...PACKET]
    },
    // Passthrough without and with [telemetry] (to a local receiver), each window in a fresh process, in the
    // passthrough column.
    telemetryRow("logins per second, telemetry off (fresh processes)", "passthrough_telemetry_off", "perSecond", fixed(0)),
    telemetryRow("logins per second, telemetry on (fresh processes)", "passthrough_telemetry", "perSecond", fixed(0)),
    telemetryRow("proxy CPU, telemetry on (% of a core)", "passthrough_telemetry", "cpuPercent", fixed(1)),
    telemetryRow("logins per second, telemetry on over OTLP/HTTP (fresh processes)", "passthrough_telemetry_http", "perSecond", fixed(0)),
    { scenario: "4. Status pings", metric: "pings per second, Portal from its cache", value: med(results.status, "perSecond"), format: fixed(0) },
    {
      scenario: "4. Status pings",
      metric: "pings per second, Portal asking the backend (ttl 1ms)",
      value: (target) => median(values(PORTAL.includes(/** @type {any} */ (target)) ? results.statusRelayed : results.status, target, "perSecond")),
      format: fixed(0)
    },
    { scenario: "5. Memory", metric: "idle sessions held", value: med(results.memory, "sessions"), format: fixed(0), measured: proxies },
    { scenario: "5. Memory", metric: "proxy RSS before (MiB)", value: med(results.memory, "beforeMiB"), format: fixed(1), measured: proxies },
    { scenario: "5. Memory", metric: "proxy RSS per idle session (KiB)", value: med(results.memory, "perSessionKiB"), format: fixed(1), measured: proxies }
  ]
}

/** @param {number | undefined} value @param {number | undefined} base */
const ratio = (value, base) => (value === undefined || base === undefined || base === 0 ? undefined : value / base)

/**
 * @param {Results} results
 * @param {Available} available
 */
const medianTable = (results, available) => {
  const header = [
    "Scenario",
    "Metric",
    "direct",
    "HAProxy",
    "Portal passthrough",
    "Portal zero_copy",
    "Portal offline",
    "Portal client_only",
    "passthrough ÷ direct",
    "passthrough ÷ HAProxy",
    "zero_copy ÷ direct",
    "zero_copy ÷ HAProxy"
  ]
  const lines = [`| ${header.join(" | ")} |`, `|${header.map((_, i) => (i < 2 ? "---" : "---:")).join("|")}|`]
  for (const row of rows(results)) {
    const haproxyRan = row.needs === undefined ? available.haproxy : available[row.needs] === true
    const applies = (/** @type {TargetName} */ target) => (row.measured ?? TARGETS).includes(target)
    const cell = (/** @type {TargetName} */ target) => {
      if (!applies(target)) return "—"
      if (target === "haproxy" && !haproxyRan) return "n/a"
      const value = row.value(target)
      return value === undefined ? "—" : row.format(value)
    }
    const ratioCell = (/** @type {TargetName} */ target, /** @type {TargetName} */ base) => {
      // A ratio needs both columns: a row measured for passthrough alone has none.
      if (!applies(target) || !applies(base)) return "—"
      if (base === "haproxy" && !haproxyRan) return "n/a"
      if (base === "direct" && row.noDirectRatio === true) return "—"
      const value = ratio(row.value(target), row.value(base))
      return value === undefined ? "—" : `${value.toFixed(2)}×`
    }
    lines.push(
      `| ${[
        row.scenario,
        row.metric,
        ...TARGETS.map(cell),
        ratioCell("passthrough", "direct"),
        ratioCell("passthrough", "haproxy"),
        ratioCell("zero_copy", "direct"),
        ratioCell("zero_copy", "haproxy")
      ].join(" | ")} |`
    )
  }
  return lines.join("\n")
}

/**
 * @param {Results} results
 * @param {Available} available
 */
const targetTable = (results, available) => {
  const med = (/** @type {ByTarget} */ byTarget, /** @type {TargetName} */ target, /** @type {string} */ field) =>
    median(values(byTarget, target, field))
  const toHaproxy = (/** @type {ByTarget} */ byTarget, /** @type {TargetName} */ target, /** @type {string} */ field) =>
    available.haproxy ? ratio(med(byTarget, target, field), med(byTarget, "haproxy", field)) : undefined
  /** @type {Array<[string, number | undefined, ((value: number) => boolean) | "reference", (value: number) => string]>} */
  const checks = []
  const times = (/** @type {number} */ value) => `${value.toFixed(2)}× HAProxy`
  checks.push(
    ["passthrough bulk throughput ≥ 0.75× HAProxy", toHaproxy(results.bulk, "passthrough", "mibPerSecond"), (v) => v >= 0.75, times],
    ["passthrough bulk CPU per GiB ≤ 2× HAProxy", toHaproxy(results.bulk, "passthrough", "cpuPerGiB"), (v) => v <= 2, times],
    ["zero_copy bulk throughput ≥ 0.95× HAProxy", toHaproxy(results.bulk, "zero_copy", "mibPerSecond"), (v) => v >= 0.95, times],
    ["zero_copy bulk CPU per GiB ≤ 1× HAProxy", toHaproxy(results.bulk, "zero_copy", "cpuPerGiB"), (v) => v <= 1, times]
  )
  // The latency target is judged on the native load where it ran: the Node.js load's own tail is as large as what
  // the target bounds (docs/benchmark-history.md, thirteenth round). The Node.js load's figure stays as a reference.
  const ms = (/** @type {number} */ v) => `${v.toFixed(3)} ms`
  const native = available.nativeGame === true
  for (const target of PORTAL) {
    const [game, load] = native ? [results.gameNative, "native load"] : [results.game, "Node.js load"]
    checks.push([`${target} game p99 added latency < 1 ms (${load})`, addedOverDirect(game, target, "p99"), (v) => v < 1, ms])
  }
  // The packet modes run only under the native load (theirs speaks frames, and client_only encrypts).
  for (const target of PACKET) {
    checks.push([`${target} game p99 added latency < 1 ms (native load)`, addedOverDirect(results.gameNative, target, "p99"), (v) => v < 1, ms])
  }
  const offlineCpu = ratio(med(results.gameNative, "offline", "cpuPercent"), med(results.gameNative, "passthrough", "cpuPercent"))
  checks.push(["offline game proxy CPU ≤ 2× passthrough (native load)", offlineCpu, (v) => v <= 2, (v) => `${v.toFixed(2)}× passthrough`])
  checks.push([
    "client_only logins ≥ 1,000/s (one core)",
    med(results.rate, "client_only", "perSecond"),
    (v) => v >= 1000,
    (v) => `${fixed(0)(v)}/s`
  ])
  if (native) {
    for (const target of PORTAL) {
      checks.push([`${target} game p99 added latency, Node.js load`, addedOverDirect(results.game, target, "p99"), "reference", ms])
    }
  }
  for (const target of PORTAL) {
    checks.push([`${target} connection rate ≥ 0.5× HAProxy`, toHaproxy(results.rate, target, "perSecond"), (v) => v >= 0.5, times])
  }
  const telemetryOff = median(values(results.telemetry, "passthrough_telemetry_off", "perSecond"))
  checks.push([
    "passthrough logins/s with telemetry on ≥ 0.9× off",
    ratio(median(values(results.telemetry, "passthrough_telemetry", "perSecond")), telemetryOff),
    (v) => v >= 0.9,
    (v) => `${v.toFixed(2)}× off`
  ])
  checks.push([
    "passthrough logins/s with telemetry on over OTLP/HTTP",
    ratio(median(values(results.telemetry, "passthrough_telemetry_http", "perSecond")), telemetryOff),
    "reference",
    (v) => `${v.toFixed(2)}× off`
  ])
  for (const target of PORTAL) {
    checks.push([
      `${target} cached status pings ≥ 5,000/s`,
      med(results.status, target, "perSecond"),
      (v) => v >= 5000,
      (v) => `${fixed(0)(v)}/s`
    ])
  }
  for (const target of PORTAL) {
    checks.push([
      `${target} RSS per idle session < 16 KiB`,
      med(results.memory, target, "perSessionKiB"),
      (v) => v < 16,
      (v) => `${v.toFixed(1)} KiB`
    ])
  }
  const many = available.manyWorkers ?? 2
  if (results.coresRate !== undefined && Object.keys(results.coresRate).length > 0) {
    const rate = (/** @type {string} */ key) => keyedMedian(results.coresRate, key, "perSecond")
    checks.push(
      [
        `Portal ${many} workers connection rate ≥ 1.0× HAProxy nbthread ${many}`,
        available.haproxy ? ratio(rate(`workers_${many}`), rate(`nbthread_${many}`)) : undefined,
        (v) => v >= 1.0,
        times
      ],
      [
        `Portal ${many} workers connection rate ≥ 1.6× Portal 1 worker`,
        ratio(rate(`workers_${many}`), rate("workers_1")),
        (v) => v >= 1.6,
        (v) => `${v.toFixed(2)}× Portal 1 worker`
      ]
    )
  }
  if (results.startup !== undefined && Object.keys(results.startup).length > 0) {
    const one = keyedMedian(results.startup, "workers_1", "startupMiB")
    const more = keyedMedian(results.startup, `workers_${many}`, "startupMiB")
    const mib = (/** @type {number} */ v) => `${v.toFixed(1)} MiB`
    checks.push(
      [`Portal startup RSS, 1 worker ≤ ${STARTUP_RSS_MIB} MiB`, one, (v) => v <= STARTUP_RSS_MIB, mib],
      [
        `Portal startup RSS, each further worker ≤ ${STARTUP_RSS_PER_WORKER_MIB} MiB`,
        one === undefined || more === undefined ? undefined : (more - one) / (many - 1),
        (v) => v <= STARTUP_RSS_PER_WORKER_MIB,
        mib
      ]
    )
  }
  for (const key of Object.keys(results.flood ?? {})) {
    const workers = Number(key.split("_")[1])
    const who = `${workers} worker${workers === 1 ? "" : "s"}`
    checks.push(
      [`flood RSS growth ≤ ${FLOOD_GROWTH_MIB} MiB, ${who}`, keyedMedian(results.flood, key, "growthMiB"), (v) => v <= FLOOD_GROWTH_MIB, (v) => `${v.toFixed(1)} MiB`],
      [`flood: the real client served throughout, ${who}`, keyedMedian(results.flood, key, "probeFailed"), (v) => v === 0, (v) => `${v.toFixed(0)} failed`]
    )
  }
  const lines = ["| Target | Measured | Result |", "|---|---:|---|"]
  for (const [name, value, pass, format] of checks) {
    const result = value === undefined ? "n/a" : pass === "reference" ? "reference" : pass(value) ? "PASS" : "MISS"
    lines.push(`| ${name} | ${value === undefined ? "n/a" : format(value)} | ${result} |`)
  }
  return lines.join("\n")
}

/** Startup RSS at most, with one worker thread, and at most more for each further worker (MiB). */
export const STARTUP_RSS_MIB = 64
export const STARTUP_RSS_PER_WORKER_MIB = 24
/** RSS growth at most over the idle proxy during the hostile flood (MiB). */
export const FLOOD_GROWTH_MIB = 32

/**
 * @param {Record<string, Array<Sample | undefined>> | undefined} byKey @param {string} key @param {string} field
 */
const keyedMedian = (byKey, key, field) =>
  median(
    (byKey?.[key] ?? []).flatMap((sample) => {
      const value = sample?.[field]
      return typeof value === "number" && Number.isFinite(value) ? [value] : []
    })
  )

/**
 * The multi-core scenario: HAProxy with one and with M threads, Portal with one and with M worker threads.
 * @param {Results} results @param {Available} available
 */
const coresTable = (results, available) => {
  const many = available.manyWorkers ?? 2
  const columns = [
    ["nbthread_1", "HAProxy nbthread 1"],
    [`nbthread_${many}`, `HAProxy nbthread ${many}`],
    ["workers_1", "Portal 1 worker"],
    [`workers_${many}`, `Portal ${many} workers`]
  ]
  const header = ["Metric", ...columns.map(([, label]) => label), `Portal ${many} ÷ HAProxy ${many}`, `Portal ${many} ÷ Portal 1`]
  /** @type {Array<[string, Record<string, Array<Sample | undefined>> | undefined, string, (value: number) => string]>} */
  const metrics = [
    ["logins per second", results.coresRate, "perSecond", fixed(0)],
    ["proxy CPU, connection rate (% of a core)", results.coresRate, "cpuPercent", fixed(1)],
    ["cached status pings per second", results.coresStatus, "perSecond", fixed(0)],
    [`bulk throughput, ${many} connections (MiB/s)`, results.coresBulk, "mibPerSecond", fixed(0)],
    ["startup RSS (MiB)", results.startup, "startupMiB", fixed(1)]
  ]
  const lines = [`| ${header.join(" | ")} |`, `|---|${header.slice(1).map(() => "---:").join("|")}|`]
  for (const [metric, byKey, field, format] of metrics) {
    const value = (/** @type {string} */ key) => keyedMedian(byKey, key, field)
    const cell = (/** @type {string} */ key) => {
      if (key.startsWith("nbthread") && !available.haproxy) return "n/a"
      const v = value(key)
      return v === undefined ? "—" : format(v)
    }
    const ratioCell = (/** @type {string} */ a, /** @type {string} */ b) => {
      if (b.startsWith("nbthread") && !available.haproxy) return "n/a"
      const r = ratio(value(a), value(b))
      return r === undefined ? "—" : `${r.toFixed(2)}×`
    }
    lines.push(
      `| ${[metric, ...columns.map(([key]) => cell(/** @type {string} */ (key))), ratioCell(`workers_${many}`, `nbthread_${many}`), ratioCell(`workers_${many}`, "workers_1")].join(" | ")} |`
    )
  }
  return lines.join("\n")
}

/** The hostile flood, Portal with one and with two worker threads. @param {Results} results */
const floodTable = (results) => {
  const keys = Object.keys(results.flood ?? {})
  const label = (/** @type {string} */ key) => {
    const workers = Number(key.split("_")[1])
    return `Portal ${workers} worker${workers === 1 ? "" : "s"}`
  }
  /** @type {Array<[string, string, (value: number) => string]>} */
  const metrics = [
    ["RSS idle, before the flood (MiB)", "idleMiB", fixed(1)],
    ["RSS at its highest during the flood (MiB)", "peakMiB", fixed(1)],
    ["RSS growth over idle (MiB)", "growthMiB", fixed(1)],
    ["RSS a second after the flood (MiB)", "afterMiB", fixed(1)],
    ["flood connections per second", "connectionsPerSecond", fixed(0)],
    ["real client: attempts served", "probeServed", fixed(0)],
    ["real client: attempts failed", "probeFailed", fixed(0)],
    ["real client: slowest answer (ms)", "probeSlowestMs", fixed(0)]
  ]
  const lines = [`| Metric | ${keys.map(label).join(" | ")} |`, `|---|${keys.map(() => "---:").join("|")}|`]
  for (const [metric, field, format] of metrics) {
    lines.push(`| ${metric} | ${keys.map((key) => { const v = keyedMedian(results.flood, key, field); return v === undefined ? "—" : format(v) }).join(" | ")} |`)
  }
  return lines.join("\n")
}

/**
 * Lines naming every measurement that saw errors (failed logins, pings that timed out).
 * @param {Results} results
 */
const errorNotes = (results) =>
  Object.entries(results).flatMap(([scenario, byTarget]) =>
    Object.entries(byTarget).flatMap(([target, samples]) =>
      samples.flatMap((sample, round) =>
        typeof sample?.errors === "number" && sample.errors > 0
          ? [`- ${scenario}, ${target}, round ${round + 1}: ${sample.errors} failed attempt(s), first: ${sample.firstError}`]
          : []
      )
    )
  )

/**
 * How much else ran on the machine during the timed windows: CPU used by processes outside the bench, and time the
 * hypervisor took (steal). Both disturb latency tails first.
 * @param {Results} results
 */
const disturbanceNote = (results) => {
  const all = Object.values(results).flatMap((byTarget) => Object.values(byTarget).flat())
  const of = (/** @type {string} */ field) =>
    all.flatMap((sample) => (typeof sample?.[field] === "number" ? [Math.max(0, /** @type {number} */ (sample[field]))] : []))
  const other = of("otherPercent")
  const steal = of("stealPercent")
  if (other.length === 0) return "- Other load during the windows: not measured."
  const percent = (/** @type {number | undefined} */ value) => `${(value ?? 0).toFixed(0)}%`
  return (
    `- Other load during the timed windows (CPU of processes outside the bench, % of one core): median ${percent(median(other))}, ` +
    `max ${percent(Math.max(...other))}; hypervisor steal: median ${percent(median(steal))}, max ${percent(Math.max(...steal))}.`
  )
}

/**
 * The whole report: both tables, then the conditions of the run (`notes`), how disturbed it was, and any errors.
 * @param {{ smoke: boolean, results: Results, available: Available, notes: Array<string> }} run
 */
export const renderReport = ({ smoke, results, available, notes }) =>
  [
    `# Portal benchmark${smoke ? " (smoke run: sizes too small for the numbers to mean anything)" : ""}`,
    "",
    `${new Date().toISOString().slice(0, 10)}, \`npm run bench${smoke ? " -- --smoke" : ""}\`.`,
    "",
    "## Medians",
    "",
    medianTable(results, available),
    "",
    ...(results.coresRate !== undefined && Object.keys(results.coresRate).length > 0
      ? [`## Multi-core: worker threads and HAProxy threads`, "", coresTable(results, available), ""]
      : []),
    ...(results.flood !== undefined && Object.keys(results.flood).length > 0 ? ["## Hostile flood", "", floodTable(results), ""] : []),
    "## Targets",
    "",
    targetTable(results, available),
    "",
    "## Conditions",
    "",
    ...notes,
    disturbanceNote(results),
    ...errorNotes(results),
    ""
  ].join("\n")
