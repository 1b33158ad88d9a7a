/**
 * Configured features that this build of Portal decodes and validates but does not run (yet, or in this configuration).
 * The startup log and `--check` list them so that nothing configured silently pretends to work.
 */
import type { ServerDefinition } from "../../schema/decode.js"
import type { GlobalConfig } from "../../schema/GlobalConfig.js"
import { availableParallelism } from "node:os"
import { KEEPALIVE_MAX_PROBES, KEEPALIVE_MAX_SECONDS, keepaliveParams, keepaliveSupport, keepaliveWithinLimits } from "../native/keepalive.js"
import { spliceSupport } from "../relay/zeroCopy.js"
import { reusePortUnsupported, workerThreadsUnsupported } from "../workers/listening.js"

export interface InactiveFeature {
  /** Where it is configured: `[telemetry]`, `servers/lobby.toml: proxy_mode`. */
  readonly where: string
  readonly what: string
}

export const inactiveFeatures = (
  global: GlobalConfig,
  servers: Iterable<ServerDefinition>
): Array<InactiveFeature> => {
  const out: Array<InactiveFeature> = []
  const add = (where: string, what: string) => out.push({ where, what })
  const workers = global.worker_threads === 0 ? availableParallelism() : global.worker_threads
  const noWorkers = workers > 1 ? workerThreadsUnsupported() : undefined
  if (noWorkers !== undefined) {
    const asked = global.worker_threads === 0 ? `the default (0: one per core) asks for ${workers} workers` : `asks for ${workers} workers`
    add("worker_threads", `${asked}, but ${noWorkers}; Portal runs on one thread`)
  }
  if (global.so_reuseport) {
    const noReusePort = reusePortUnsupported()
    // Named as configured: 0 on a one-core machine is one thread too, and "worker_threads = 1" would not be what the file says.
    const oneThread = global.worker_threads === 0 ? "worker_threads = 0: one per core, and there is one core" : `worker_threads = ${global.worker_threads}`
    if (workers <= 1) add("so_reuseport", `has no effect with one thread (${oneThread})`)
    else if (noWorkers !== undefined) add("so_reuseport", "has no effect: Portal runs on one thread (see worker_threads)")
    else if (noReusePort !== undefined) add("so_reuseport", `SO_REUSEPORT is unavailable: ${noReusePort}; the workers share one listening socket`)
  }
  const telemetry = global.telemetry
  if (telemetry?.enabled === true && telemetry.endpoint === undefined) {
    const api = global.web?.enable_api === true
    if (telemetry.traces.enabled) add("[telemetry.traces]", "there is no endpoint: traces are not recorded")
    if (telemetry.metrics.enabled && !api) add("[telemetry.metrics]", "there is no endpoint and no admin API: metrics go nowhere")
    else if (telemetry.metrics.enabled) add("[telemetry.metrics]", "there is no endpoint: metrics are only served at /api/v1/metrics")
  }
  if (Object.keys(global.plugins).length > 0) add("[plugins]", "WASM plugins are not active yet")
  if (global.permissions.admins.length > 0 || global.permissions.player_commands.length > 0) {
    add("[permissions]", "proxy commands are not active yet")
  }
  const keepalive = keepaliveSupport()
  if (!keepalive.full) {
    // Always there (its defaults apply without the table): say it is about the probes' interval and count.
    add("[keepalive]", `interval and retries (set or default) need the native addon (${keepalive.reason}); only time applies`)
  }
  const list = [...servers]
  const spliceWanted = list.filter((server) => server.config.proxy_mode === "zero_copy")
  const splice = spliceSupport()
  if (spliceWanted.length > 0 && !splice.available) {
    add(
      spliceWanted.map((server) => `${server.file}: proxy_mode`).join(", "),
      `zero_copy is unavailable (${splice.reason}); relaying as passthrough`
    )
  }
  for (const server of list) {
    const where = `${server.file}`
    if (server.config.limbo_handlers.length > 0) add(`${where}: limbo_handlers`, "limbo handlers are not active yet")
    if (server.config.network !== undefined) add(`${where}: network`, "server switching is not active yet")
  }
  return out
}

/** A configuration that works but probably not as meant: logged as a warning at start and noted by `--check`. */
export interface ConfigWarning {
  readonly where: string
  readonly what: string
}

const PACKET_MODES: ReadonlyArray<string> = ["offline", "client_only"]

export const configurationWarnings = (global: GlobalConfig, servers: Iterable<ServerDefinition>): Array<ConfigWarning> => {
  const out: Array<ConfigWarning> = []
  if (keepaliveSupport().full && !keepaliveWithinLimits(keepaliveParams(global))) {
    out.push({
      where: "[keepalive]",
      what: `Linux allows at most ${KEEPALIVE_MAX_PROBES} retries and ${KEEPALIVE_MAX_SECONDS}s for time and interval: larger values are set at those limits`
    })
  }
  const cores = availableParallelism()
  if (global.worker_threads > cores) {
    out.push({
      where: "worker_threads",
      what: `asks for ${global.worker_threads} workers on ${cores} core(s): workers beyond the cores add memory (about 24 MiB each) and start time, not speed`
    })
  }
  for (const server of servers) {
    const forwarding = server.config.forwarding_mode ?? global.forwarding.mode
    if (server.config.proxy_mode === "client_only" && forwarding === "none") {
      out.push({
        where: `${server.file}: proxy_mode`,
        what: "client_only authenticates players, but the server has no forwarding: its backend sees offline-mode UUIDs and no skins (set forwarding_mode or [forwarding] mode)"
      })
    }
    if (forwarding === "modern" && !PACKET_MODES.includes(server.config.proxy_mode)) {
      out.push({
        where: `${server.file}: forwarding_mode`,
        what: `modern forwarding needs a packet proxy mode (offline or client_only), not ${server.config.proxy_mode}: logins to this server are refused`
      })
    }
  }
  return out
}

/** The warnings as the log and `--check` say them, one line each. */
export const configurationWarningLines = (global: GlobalConfig, servers: Iterable<ServerDefinition>): Array<string> =>
  configurationWarnings(global, servers).map((warning) => `${warning.where}: ${warning.what}`)
