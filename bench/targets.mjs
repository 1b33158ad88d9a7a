// @ts-check
/**
 * The four targets a scenario runs against: the backend directly, HAProxy in `mode tcp`, Portal `passthrough` and
 * Portal `zero_copy`; for the bulk scenario only, HAProxy splicing; for the native game load and the connection rate
 * only, Portal's packet modes `offline` and `client_only` (the latter with a fake session service). Each proxy is a
 * process of its own, pinned to the proxy CPU, its output kept in a log file.
 */
import { spawn, spawnSync } from "node:child_process"
import { accessSync, constants, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { waitForPort } from "./system.mjs"

export const DOMAIN = "bench.example.com"
/** The server name under which Portal relays to the native echo backend of the game scenario (native.mjs). */
export const GAME_DOMAIN = "game.bench.example.com"
const PORTAL_MAIN = path.resolve(process.env.BENCH_PORTAL_MAIN ?? "dist/main.js")
/**
 * The Node flags Portal's launchers use, read from the first line of its main file (`#!/usr/bin/env -S node FLAGS`,
 * as the `portal` command and `npm start` run it; docs/operations.md says why).
 */
export const PORTAL_NODE_FLAGS = (() => {
  const words = (readFileSync(PORTAL_MAIN, "utf8").split("\n", 1)[0] ?? "").replace(/^#!/, "").trim().split(/\s+/)
  return words.includes("node") ? words.slice(words.indexOf("node") + 1) : []
})()
/** Portal's default `[status_cache] ttl`. */
export const DEFAULT_STATUS_TTL = "5s"

/**
 * @typedef {object} Target
 * @property {string} name
 * @property {number} port where the load generator connects
 * @property {{ port: number, host: string, flavour?: "raw" | "framed" | "encrypted" }} [game] where the native game
 *   load connects, the server address it names to reach the native echo backend, and how it logs in
 * @property {() => number | undefined} pid the proxy process, undefined for the direct connection
 * @property {(options?: { statusTtl?: string }) => Promise<void>} restart a fresh process (Portal: with this TTL)
 * @property {() => Promise<void>} stop
 */

/**
 * Starts a proxy process; resolves once it accepts connections.
 * @param {{ name: string, command: string, args: Array<string>, port: number, logFile: string, cpu: number | string | undefined, env?: Record<string, string> }} spec
 */
const startProcess = async (spec) => {
  const log = openSync(spec.logFile, "a")
  const [command, args] =
    spec.cpu === undefined ? [spec.command, spec.args] : ["taskset", ["-c", String(spec.cpu), spec.command, ...spec.args]]
  // taskset execs the command: the pid is the proxy's own. Shutdown grace is for players, not for a bench.
  const child = spawn(command, args, { stdio: ["ignore", log, log], env: { ...process.env, PORTAL_SHUTDOWN_GRACE_MS: "200", ...spec.env } })
  const exited = new Promise((resolve) => child.once("exit", resolve))
  const logTail = () => readFileSync(spec.logFile, "utf8").split("\n").slice(-20).join("\n")
  await waitForPort(spec.port, () =>
    child.exitCode !== null || child.signalCode !== null ? `${spec.name} exited at startup:\n${logTail()}` : undefined
  )
  return {
    pid: /** @type {number} */ (child.pid),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000)
      await exited
      clearTimeout(timer)
    }
  }
}

/** @param {number} backendPort @param {number} [nativeEchoPort] @returns {Target} */
export const directTarget = (backendPort, nativeEchoPort) => ({
  name: "direct",
  port: backendPort,
  ...(nativeEchoPort === undefined ? {} : { game: { port: nativeEchoPort, host: DOMAIN } }),
  pid: () => undefined,
  restart: async () => {},
  stop: async () => {}
})

/**
 * Portal in one proxy mode. With `nativeEchoPort`, a second server, GAME_DOMAIN, relays to the native echo backend.
 * The packet modes forward the player with `legacy` forwarding (a client_only setup forwards the skin); client_only
 * asks `sessionServer`. `workers` is its `worker_threads` (1 unless given: the data plane on the main thread);
 * `globals` and `tables` are more lines of proxy.toml (top-level keys, and tables); `telemetry` a `[telemetry]` table
 * to add; `name` tells it from another Portal in the same mode (with `telemetry`, the name is its own).
 * @param {{ dir: string, port: number, backendPort: number, nativeEchoPort?: number | undefined, mode: "passthrough" | "zero_copy" | "offline" | "client_only", cpu: number | string | undefined, nodeFlags: Array<string>, sessionServer?: string | undefined, workers?: number, globals?: string, tables?: string | undefined, name?: string, telemetry?: { name: string, table: string } }} spec
 * @returns {Promise<Target>}
 */
export const portalTarget = async (spec) => {
  const name = spec.telemetry?.name ?? spec.name ?? spec.mode
  const dir = path.join(spec.dir, `portal-${name}`)
  mkdirSync(path.join(dir, "servers"), { recursive: true })
  const packet = spec.mode === "offline" || spec.mode === "client_only"
  const server = (/** @type {string} */ domain, /** @type {number} */ backendPort) =>
    `domains = ["${domain}"]\naddresses = ["127.0.0.1:${backendPort}"]\nproxy_mode = "${spec.mode}"\n${packet ? 'forwarding_mode = "legacy"\n' : ""}`
  writeFileSync(path.join(dir, "servers", "bench.toml"), server(DOMAIN, spec.backendPort))
  if (spec.nativeEchoPort !== undefined) writeFileSync(path.join(dir, "servers", "game.toml"), server(GAME_DOMAIN, spec.nativeEchoPort))
  /** @param {string} ttl */
  const start = (ttl) => {
    writeFileSync(
      path.join(dir, "proxy.toml"),
      `bind = "127.0.0.1:${spec.port}"\nworker_threads = ${spec.workers ?? 1}\n${spec.globals ?? ""}\n[status_cache]\nttl = "${ttl}"\n${spec.tables ?? ""}${spec.telemetry?.table ?? ""}`
    )
    return startProcess({
      name: `Portal ${name}`,
      command: process.execPath,
      args: [...PORTAL_NODE_FLAGS, ...spec.nodeFlags, PORTAL_MAIN, "--config", path.join(dir, "proxy.toml"), "--log-level", "warn", "--log-format", "json"],
      port: spec.port,
      logFile: path.join(spec.dir, `portal-${name}.log`),
      cpu: spec.cpu,
      env: spec.sessionServer === undefined ? {} : { PORTAL_SESSION_SERVER: spec.sessionServer }
    })
  }
  let running = await start(DEFAULT_STATUS_TTL)
  return {
    name,
    port: spec.port,
    ...(spec.nativeEchoPort === undefined
      ? {}
      : { game: { port: spec.port, host: GAME_DOMAIN, flavour: spec.mode === "offline" ? "framed" : spec.mode === "client_only" ? "encrypted" : "raw" } }),
    pid: () => running.pid,
    restart: async (options = {}) => {
      await running.stop()
      running = await start(options.statusTtl ?? DEFAULT_STATUS_TTL)
    },
    stop: () => running.stop()
  }
}

/**
 * HAProxy in `mode tcp`. With `splice`, it relays with splice(2) too (`option splice-request` and `splice-response`):
 * the bulk scenario's reference for what splicing costs the load on loopback, whoever does it.
 * With `game`, a second frontend on `game.port` relays to the native echo backend. `nbthread` sets its threads
 * (HAProxy's default otherwise: one per CPU it may run on); `name` tells it from another HAProxy.
 * @param {{ binary: string, dir: string, port: number, backendPort: number, maxconn: number, cpu: number | string | undefined, splice?: boolean, game?: { port: number, backendPort: number } | undefined, nbthread?: number, name?: string }} spec
 * @returns {Promise<Target>}
 */
export const haproxyTarget = async (spec) => {
  const name = spec.name ?? (spec.splice === true ? "haproxy_splice" : "haproxy")
  const config = path.join(spec.dir, `${name}.cfg`)
  writeFileSync(
    config,
    [
      "global",
      `    maxconn ${spec.maxconn}`,
      ...(spec.nbthread === undefined ? [] : [`    nbthread ${spec.nbthread}`]),
      "defaults",
      "    mode tcp",
      "    timeout connect 5s",
      "    timeout client 10m",
      "    timeout server 10m",
      ...(spec.splice === true ? ["    option splice-request", "    option splice-response"] : []),
      "frontend bench",
      `    bind 127.0.0.1:${spec.port}`,
      "    default_backend backend",
      "backend backend",
      `    server backend 127.0.0.1:${spec.backendPort}`,
      ...(spec.game === undefined
        ? []
        : ["frontend game", `    bind 127.0.0.1:${spec.game.port}`, "    default_backend game", "backend game", `    server game 127.0.0.1:${spec.game.backendPort}`]),
      ""
    ].join("\n")
  )
  const start = () =>
    startProcess({
      name: spec.splice === true ? "HAProxy (splice)" : spec.nbthread === undefined ? "HAProxy" : `HAProxy nbthread ${spec.nbthread}`,
      command: spec.binary,
      args: ["-f", config, "-db"],
      port: spec.port,
      logFile: path.join(spec.dir, `${name}.log`),
      cpu: spec.cpu
    })
  let running = await start()
  return {
    name,
    port: spec.port,
    ...(spec.game === undefined ? {} : { game: { port: spec.game.port, host: DOMAIN } }),
    pid: () => running.pid,
    restart: async () => {
      await running.stop()
      running = await start()
    },
    stop: () => running.stop()
  }
}

/** @param {string} file */
const executable = (file) => {
  try {
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

const lookUp = () =>
  [...(process.env.PATH ?? "").split(":"), "/usr/sbin", "/usr/local/sbin"]
    .map((dir) => path.join(dir, "haproxy"))
    .find(executable)

/**
 * The haproxy binary, installed with apt-get when missing and `install` is set; otherwise why there is none.
 * BENCH_HAPROXY names another binary, or `none` to leave HAProxy out.
 * @param {{ install: boolean, say: (line: string) => void }} options
 * @returns {{ binary: string, version: string } | { reason: string }}
 */
export const findHaproxy = ({ install, say }) => {
  const wanted = process.env.BENCH_HAPROXY
  if (wanted === "none") return { reason: "left out (BENCH_HAPROXY=none)" }
  let binary = wanted ?? lookUp()
  if (binary === undefined) {
    if (!install) return { reason: "not installed (the smoke run does not install it)" }
    if (process.getuid?.() !== 0) return { reason: "not installed, and installing it with apt-get needs root" }
    say("HAProxy is not installed: installing the Debian package haproxy with apt-get")
    const aptGet = (/** @type {Array<string>} */ args) =>
      spawnSync("apt-get", args, { encoding: "utf8", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } })
    let result = aptGet(["install", "-y", "-q", "haproxy"])
    if (result.status !== 0) {
      aptGet(["update", "-q"])
      result = aptGet(["install", "-y", "-q", "haproxy"])
    }
    binary = lookUp()
    if (result.status !== 0 || binary === undefined) {
      const why = `${result.stderr ?? ""}${result.error?.message ?? ""}`.trim().split("\n").pop()
      return { reason: `not installed, and apt-get install haproxy failed (${why || `exit ${result.status}`})` }
    }
  }
  if (!executable(binary)) return { reason: `${binary} is not an executable` }
  const version = spawnSync(binary, ["-v"], { encoding: "utf8" }).stdout.split("\n")[0] ?? "HAProxy"
  return { binary, version: version.replace(/ - https?:.*$/, "").trim() }
}
