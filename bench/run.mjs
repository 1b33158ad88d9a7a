// @ts-check
/**
 * `npm run bench`: runs every scenario against the backend directly, HAProxy, Portal passthrough and Portal
 * zero_copy (and the native game load and the connection rate against Portal offline and client_only too),
 * interleaved over several rounds, and prints the Markdown report (also written to
 * bench/results/latest.md, with every sample in bench/results/latest.json). The connection rate is also measured
 * against Portal passthrough with `[telemetry]` on, exporting to a local OTLP receiver (otlpReceiver.mjs), and off,
 * each window in a process started for it.
 * `--smoke` (or BENCH_SMOKE=1): about a second per scenario with small sizes, writes no file unless `--out` is given.
 * `--only bulk,rate`: those scenarios only. `--rounds N`: N rounds instead of 5 (a quicker, noisier run that writes
 * no file unless `--out` is given). `--targets haproxy,passthrough`: those targets only (direct, haproxy,
 * passthrough, zero_copy, offline, client_only; writes no file). `--profile DIR`: Portal runs with --cpu-prof, profiles land in DIR.
 *
 * The proxies run on CPU 1, the orchestrator, backend and load generators on CPU 0, so every proxy gets one whole
 * core and none competes with the load it serves. The bulk scenario runs a second time with nothing pinned, for
 * reference rows. A window the machine did not give to the bench (steal, other processes) is measured again
 * (disturbance.mjs).
 */
import { fork, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { MAX_REPEATS, measureUndisturbed, repeatNote } from "./disturbance.mjs"
import { client } from "./ipc.mjs"
import { buildNativeLoad, startNativeEcho } from "./native.mjs"
import { renderReport } from "./report.mjs"
import * as scenarios from "./scenarios.mjs"
import { allCpus, canPin, coresPlan, freePort, machine, pin, raiseFileLimit, widenEphemeralPorts } from "./system.mjs"
import { DEFAULT_STATUS_TTL, directTarget, findHaproxy, haproxyTarget, PORTAL_NODE_FLAGS, portalTarget } from "./targets.mjs"

const LOAD_CPU = 0
const PROXY_CPU = 1
/** Descriptors a proxy holds per idle relayed session: client and backend sockets (zero_copy lends pipes only to bursts). */
const FDS_PER_SESSION = { haproxy: 2, passthrough: 2, zero_copy: 2 }
/** Descriptors kept aside for everything else a process opens. */
const FD_RESERVE = 200

const SCENARIOS = ["bulk", "game", "rate", "status", "memory", "cores", "flood"]
const { values: args } = parseArgs({
  options: {
    smoke: { type: "boolean", default: process.env.BENCH_SMOKE === "1" },
    out: { type: "string" },
    only: { type: "string" },
    profile: { type: "string" },
    rounds: { type: "string" },
    targets: { type: "string" }
  },
  strict: true
})
const smoke = /** @type {boolean} */ (args.smoke)
const only = args.only?.split(",") ?? SCENARIOS
const unknown = only.filter((name) => !SCENARIOS.includes(name))
if (unknown.length > 0) {
  process.stderr.write(`bench: --only takes ${SCENARIOS.join(", ")}; not ${unknown.join(", ")}\n`)
  process.exit(2)
}
// A partial run writes no file unless asked: latest.md always holds a whole run.
const TARGETS = ["direct", "haproxy", "passthrough", "zero_copy", "offline", "client_only"]
/** The packet modes: measured by the native game load and the connection rate only (their load must speak frames). */
const PACKET_MODES = /** @type {const} */ (["offline", "client_only"])
const chosen = args.targets?.split(",") ?? TARGETS
const unknownTargets = chosen.filter((name) => !TARGETS.includes(name))
if (unknownTargets.length > 0) {
  process.stderr.write(`bench: --targets takes ${TARGETS.join(", ")}; not ${unknownTargets.join(", ")}\n`)
  process.exit(2)
}
const partial = smoke || args.only !== undefined || args.rounds !== undefined || args.targets !== undefined
const out = args.out ?? (partial ? undefined : "bench/results/latest.md")
/** Node options of the Portal processes: --profile DIR writes a CPU profile per Portal process there on exit. */
const portalFlags = [...(process.env.BENCH_NODE_FLAGS?.split(" ").filter(Boolean) ?? []), ...(args.profile === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${path.resolve(args.profile)}`])]

/** Sizes and durations (ms) per scenario. */
const PLAN = smoke
  ? {
      rounds: 1,
      rateRounds: 1,
      telemetryWarmMs: 500,
      gameRounds: 1,
      memoryRounds: 1,
      coresRounds: 1,
      coresWarmMs: 500,
      startup: { settleMs: 1000, starts: 1 },
      flood: { settleMs: 1000, windowMs: 2000, concurrency: 8, held: 100 },
      bulk: { warmMs: 200, windowMs: 800, count: 1, concurrency: 1 },
      game: { warmMs: 300, windowMs: 1000, count: 50, concurrency: 25 },
      rate: { warmMs: 200, windowMs: 800, count: 0, concurrency: 16 },
      status: { warmMs: 200, windowMs: 800, count: 0, concurrency: 16 },
      memory: { warmMs: 300, windowMs: 0, count: 500, concurrency: 100 }
    }
  : {
      rounds: 5,
      // The connection rate's targets are ratios of two medians (telemetry on against off, Portal against HAProxy),
      // and on a shared 2-CPU machine five rounds of it moved such a ratio by ±0.1 from run to run.
      rateRounds: 9,
      // The telemetry comparison: the load a fresh process takes before it is measured (its code compiled, its heap
      // grown, its first exports sent).
      telemetryWarmMs: 5000,
      gameRounds: 5,
      memoryRounds: 3,
      coresRounds: 3,
      // The logins each multi-core proxy takes before its rounds: each worker compiles the login path for itself,
      // and with two workers on this machine the rate settled only after about 5 s of load.
      coresWarmMs: 6000,
      startup: { settleMs: 3500, starts: 3 },
      flood: { settleMs: 3500, windowMs: 40_000, concurrency: 32, held: 600 },
      bulk: { warmMs: 1000, windowMs: 3000, count: 1, concurrency: 1 },
      game: { warmMs: 2000, windowMs: 4000, count: 1000, concurrency: 100 },
      rate: { warmMs: 500, windowMs: 2000, count: 0, concurrency: 32 },
      status: { warmMs: 500, windowMs: 2000, count: 0, concurrency: 32 },
      memory: { warmMs: 1000, windowMs: 0, count: 10_000, concurrency: 200 }
    }

if (args.rounds !== undefined) {
  const rounds = Number(args.rounds)
  if (!Number.isInteger(rounds) || rounds < 1) {
    process.stderr.write(`bench: --rounds takes a whole number of at least 1, not ${args.rounds}\n`)
    process.exit(2)
  }
  PLAN.rounds = rounds
  PLAN.rateRounds = rounds
  PLAN.gameRounds = Math.min(PLAN.gameRounds, rounds)
  PLAN.memoryRounds = Math.min(PLAN.memoryRounds, rounds)
  PLAN.coresRounds = Math.min(PLAN.coresRounds, rounds)
}

const say = (/** @type {string} */ line) => process.stderr.write(`bench: ${line}\n`)

/** @template T @param {ReadonlyArray<T>} items @param {number} by */
const rotate = (items, by) => items.map((_, i) => /** @type {T} */ (items[(i + by) % items.length]))

const git = (/** @type {Array<string>} */ gitArgs) => spawnSync("git", gitArgs, { encoding: "utf8" }).stdout?.trim() ?? ""

/** The commit checked out, and how the report names it (uncommitted changes in src/ said). */
const revisionNow = () => {
  const commit = git(["rev-parse", "--short", "HEAD"])
  const text = commit === "" ? "unknown" : `${commit}${git(["status", "--porcelain", "--", "src"]) === "" ? "" : " with uncommitted changes in src/"}`
  return { commit, text }
}

const main = async () => {
  if (!existsSync("dist/main.js")) throw new Error("dist/main.js is missing: run npm run build first (npm run bench does)")
  // A proxy holds two descriptors per session of the memory scenario (the generator and the backend one each).
  const limits = raiseFileLimit(2 * PLAN.memory.count + 1000)
  // A smoke run measures nothing: it leaves the machine's settings alone.
  const ports = smoke ? { low: 0, high: 0, widenedFrom: undefined, restore: () => {} } : widenEphemeralPorts()
  const pinned = canPin()
  if (pinned) pin(process.pid, LOAD_CPU)
  const proxyCpu = pinned ? PROXY_CPU : undefined
  const zeroCopy = JSON.parse(
    spawnSync(
      process.execPath,
      ["--input-type=module", "-e", 'import("./dist/services/relay/zeroCopy.js").then((m) => console.log(JSON.stringify(m.spliceSupport())))'],
      { encoding: "utf8" }
    ).stdout
  )
  // The code measured is what is checked out when the run starts (a commit made during the run is not in it).
  const startRevision = revisionNow()
  const dir = mkdtempSync(path.join(os.tmpdir(), "portal-bench-"))
  /** @type {Array<import("./targets.mjs").Target>} */
  const started = []
  const backendChild = fork(fileURLToPath(new URL("./backend.mjs", import.meta.url)), [], { stdio: ["ignore", "inherit", "inherit", "ipc"] })
  /** @type {Awaited<ReturnType<typeof startNativeEcho>> | undefined} */
  let nativeEcho
  /** @type {import("node:child_process").ChildProcess | undefined} */
  let receiverChild
  const stopAll = async () => {
    await Promise.all(started.map((target) => target.stop()))
    await nativeEcho?.stop()
    backendChild.kill()
    receiverChild?.kill()
    ports.restore()
    if (process.env.BENCH_KEEP_DIR === undefined) rmSync(dir, { recursive: true, force: true })
    else say(`kept ${dir}`)
  }
  for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"])) {
    process.once(signal, () => void stopAll().finally(() => process.exit(130)))
  }
  try {
    const backend = client(backendChild, "backend")
    const backendPort = await backend.ask("listen")
    const context = { backend, backendPid: /** @type {number} */ (backendChild.pid) }
    // The game scenario runs a second time with the native load and its own echo backend.
    const nativeLoad = only.includes("game") ? buildNativeLoad(dir) : { reason: "not run (--only)" }
    if ("binary" in nativeLoad) nativeEcho = await startNativeEcho(nativeLoad.binary)
    else if (only.includes("game")) say(`the native game load rows are n/a: ${nativeLoad.reason}`)

    /** @type {ReturnType<typeof findHaproxy>} */
    let haproxy = chosen.includes("haproxy") ? findHaproxy({ install: !smoke, say }) : { reason: "left out (--targets)" }
    /** Sessions the memory scenario opens through each proxy within the open-files limit. */
    const memorySessions = (/** @type {keyof typeof FDS_PER_SESSION} */ name) => {
      const perSession = name === "zero_copy" && !zeroCopy.available ? 2 : FDS_PER_SESSION[name]
      return Math.min(PLAN.memory.count, Math.floor((limits.hard - FD_RESERVE) / perSession))
    }
    say("starting the backend and the proxies")
    const targets = chosen.includes("direct") ? [directTarget(backendPort, nativeEcho?.port)] : []
    // HAProxy refuses a maxconn whose descriptors (two per connection, a few more) exceed the limit.
    const maxconn = Math.min(PLAN.memory.count + 1000, Math.floor((limits.hard - 100) / 2))
    if ("binary" in haproxy) {
      try {
        const game = nativeEcho === undefined ? undefined : { port: await freePort(), backendPort: nativeEcho.port }
        targets.push(await haproxyTarget({ binary: haproxy.binary, dir, port: await freePort(), backendPort, maxconn, cpu: proxyCpu, game }))
      } catch (error) {
        const lines = (error instanceof Error ? error.message : String(error)).split("\n")
        haproxy = { reason: `failed to start: ${(lines.find((line) => line.includes("ALERT")) ?? lines[0])?.trim()}` }
      }
    }
    if ("reason" in haproxy) say(`HAProxy columns are n/a: HAProxy ${haproxy.reason}`)
    // The bulk scenario's reference rows: HAProxy splicing as zero_copy does. Few connections, so few pipes.
    /** @type {import("./targets.mjs").Target | undefined} */
    let haproxySplice
    if ("binary" in haproxy && only.includes("bulk") && chosen.includes("zero_copy")) {
      try {
        haproxySplice = await haproxyTarget({ binary: haproxy.binary, dir, port: await freePort(), backendPort, maxconn: 100, cpu: proxyCpu, splice: true })
      } catch (error) {
        say(`the HAProxy splice reference rows are n/a: it failed to start: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`)
      }
    }
    for (const mode of /** @type {const} */ (["passthrough", "zero_copy"])) {
      if (chosen.includes(mode)) {
        targets.push(await portalTarget({ dir, port: await freePort(), backendPort, nativeEchoPort: nativeEcho?.port, mode, cpu: proxyCpu, nodeFlags: portalFlags }))
      }
    }
    // The telemetry rows: passthrough without telemetry and with it, exporting traces and metrics (the defaults) to a
    // receiver that runs beside the load, over OTLP/gRPC (the default protocol, which the target judges) and over
    // OTLP/HTTP. Measured apart from the other rows, each window in a freshly started process (below).
    /** @type {Array<{ name: import("./report.mjs").SampleKey, table: string }>} */
    const telemetryVariants = []
    /** @type {{ ask: (cmd: string, args?: Record<string, unknown>) => Promise<any> } | undefined} */
    let receiver
    if (chosen.includes("passthrough") && only.includes("rate")) {
      receiverChild = fork(fileURLToPath(new URL("./otlpReceiver.mjs", import.meta.url)), [], { stdio: ["ignore", "inherit", "inherit", "ipc"] })
      if (pinned && receiverChild.pid !== undefined) pin(receiverChild.pid, LOAD_CPU)
      receiver = client(receiverChild, "OTLP receiver")
      const ports = { grpc: await receiver.ask("listen"), http: await receiver.ask("listenHttp") }
      telemetryVariants.push({ name: "passthrough_telemetry_off", table: "" })
      for (const protocol of /** @type {const} */ (["grpc", "http"])) {
        const table = `\n[telemetry]\nenabled = true\nendpoint = "http://127.0.0.1:${ports[protocol]}"\nprotocol = "${protocol}"\n`
        telemetryVariants.push({ name: protocol === "grpc" ? "passthrough_telemetry" : "passthrough_telemetry_http", table })
      }
    }
    /** @type {Array<import("./targets.mjs").Target>} */
    const packetTargets = []
    const sessionServer = chosen.includes("client_only") ? `http://127.0.0.1:${await backend.ask("sessionService")}` : undefined
    for (const mode of PACKET_MODES) {
      if (chosen.includes(mode)) {
        packetTargets.push(
          await portalTarget({ dir, port: await freePort(), backendPort, nativeEchoPort: nativeEcho?.port, mode, cpu: proxyCpu, nodeFlags: portalFlags, ...(mode === "client_only" ? { sessionServer } : {}) })
        )
      }
    }
    // The client_only game load logs in online, which needs the native load built with libcrypto.
    const gameNativeTargets = [...targets, ...packetTargets.filter((target) => target.name !== "client_only" || ("crypto" in nativeLoad && nativeLoad.crypto))]
    if (chosen.includes("client_only") && "binary" in nativeLoad && !nativeLoad.crypto) say("the client_only native game rows are n/a: the native load was built without libcrypto")
    started.push(...targets.filter((target) => target.name !== "direct"), ...packetTargets, ...(haproxySplice === undefined ? [] : [haproxySplice]))
    const bulkTargets = haproxySplice === undefined ? targets : [...targets, haproxySplice]
    const portals = targets.filter((target) => target.name === "passthrough" || target.name === "zero_copy")
    const proxies = targets.filter((target) => target.name !== "direct")

    /** @type {import("./report.mjs").Results} */
    const results = { bulk: {}, bulkUnpinned: {}, game: {}, gameNative: {}, rate: {}, telemetry: {}, status: {}, statusRelayed: {}, memory: {}, coresRate: {}, coresStatus: {}, coresBulk: {}, startup: {}, flood: {} }
    /** Windows measured again because the machine was busy elsewhere (see disturbance.mjs). */
    /** @type {Array<{ scenario: string, target: string, round: number, attempts: Array<number> }>} */
    const repeats = []
    /**
     * @template {{ name: string }} T
     * @param {keyof typeof results} key @param {Array<T>} among @param {number} rounds
     * @param {(target: T) => Promise<Record<string, any>>} measure
     */
    const interleave = async (key, among, rounds, measure) => {
      for (let round = 0; round < rounds; round++) {
        for (const target of rotate(among, round)) {
          say(`${key}: round ${round + 1}/${rounds}, ${target.name}`)
          const samples = (results[key][/** @type {import("./report.mjs").SampleKey} */ (target.name)] ??= [])
          const { sample, attempts } = await measureUndisturbed(() => measure(target), smoke ? 0 : MAX_REPEATS)
          samples[round] = sample
          if (attempts.length > 1) {
            say(`${key}: round ${round + 1}/${rounds}, ${target.name} measured ${attempts.length} times (disturbed)`)
            repeats.push({ scenario: key, target: target.name, round, attempts })
          }
        }
      }
    }

    say("warming up")
    for (const target of bulkTargets) {
      if (target !== haproxySplice) await scenarios.connectionRate(context, target, { ...PLAN.rate, warmMs: 0 })
      await scenarios.bulk(context, target, { ...PLAN.bulk, warmMs: 0, windowMs: PLAN.bulk.warmMs })
    }
    for (const target of packetTargets) await scenarios.connectionRate(context, target, { ...PLAN.rate, warmMs: 0 })
    if (only.includes("bulk")) await interleave("bulk", bulkTargets, PLAN.rounds, (target) => scenarios.bulk(context, target, PLAN.bulk))
    if (only.includes("bulk") && pinned) {
      // Reference rows: the same relay with nothing pinned, as on a host where the proxy shares its cores with the
      // servers behind it. The targets are judged on the pinned layout above.
      const proxyPids = bulkTargets.flatMap((target) => target.pid() ?? [])
      for (const pid of [process.pid, context.backendPid, ...proxyPids]) pin(pid, allCpus())
      try {
        await interleave("bulkUnpinned", bulkTargets, PLAN.rounds, (target) => scenarios.bulk(context, target, PLAN.bulk))
      } finally {
        for (const pid of [process.pid, context.backendPid]) pin(pid, LOAD_CPU)
        for (const target of bulkTargets) {
          const pid = target.pid()
          if (pid !== undefined) pin(pid, PROXY_CPU)
        }
      }
    }
    if (only.includes("game")) await interleave("game", targets, PLAN.gameRounds, (target) => scenarios.game(context, target, PLAN.game))
    if (nativeEcho !== undefined && "binary" in nativeLoad) {
      const native = { backend: { ask: nativeEcho.ask }, backendPid: nativeEcho.pid }
      await interleave("gameNative", gameNativeTargets, PLAN.gameRounds, (target) => scenarios.gameNative(native, target, PLAN.game, nativeLoad.binary))
    }
    if (only.includes("rate")) {
      await interleave("rate", [...targets, ...packetTargets], PLAN.rateRounds, (target) => scenarios.connectionRate(context, target, PLAN.rate))
    }
    if (telemetryVariants.length > 0) {
      // Telemetry on against off is a ratio of Portal processes, and on a shared machine one process can stay faster or
      // slower than another of the same configuration for its whole life (where its code was compiled, what its heap
      // kept), and a process that sat idle for seconds serves the next logins slower (in part V8's memory reducer):
      // measured in one long-lived process each, the ratio over gRPC moved from 0.76x to 1.01x between runs. Here
      // every window has a process of its own, started for it, warmed and measured at once, then stopped: each median
      // spans as many processes as rounds, and every variant comes to its window with the same history.
      await interleave("telemetry", telemetryVariants, PLAN.rateRounds, async (variant) => {
        const portal = await portalTarget({ dir, port: await freePort(), backendPort, mode: "passthrough", cpu: proxyCpu, nodeFlags: portalFlags, telemetry: variant })
        started.push(portal) // stopped by stopAll too if the bench is interrupted during its window
        try {
          await scenarios.connectionRate(context, portal, { ...PLAN.rate, warmMs: 0, windowMs: PLAN.telemetryWarmMs })
          return await scenarios.connectionRate(context, portal, PLAN.rate)
        } finally {
          await portal.stop()
        }
      })
    }
    const received = receiver === undefined ? undefined : await receiver.ask("snapshot")
    if (only.includes("status")) {
      await interleave("status", targets, PLAN.rounds, (target) => scenarios.statusPings(context, target, PLAN.status))
      // The cache is global to a Portal process: restart both with a TTL that makes nearly every ping ask the backend.
      for (const portal of portals) {
        await portal.restart({ statusTtl: "1ms" })
        await scenarios.statusPings(context, portal, { ...PLAN.status, warmMs: 0 })
      }
      await interleave("statusRelayed", portals, PLAN.rounds, (target) => scenarios.statusPings(context, target, PLAN.status))
    }
    if (only.includes("memory")) {
      await interleave("memory", proxies, PLAN.memoryRounds, (target) =>
        scenarios.memory(context, target, { ...PLAN.memory, count: memorySessions(/** @type {any} */ (target.name)) })
      )
    }

    // The multi-core scenario and the flood: proxies on their own CPUs where the machine has enough, else sharing all
    // of them with the load (system.mjs, coresPlan). Their processes run only for these scenarios.
    const cores = coresPlan()
    const manyWorkers = Math.min(cores.proxyCpus, 64)
    const generators = Math.max(1, Number(process.env.BENCH_CORES_GENERATORS ?? Math.max(1, cores.loadCpus - (cores.pinned ? 0 : 1))))
    /** @type {{ measured: boolean, workers: number, generators: number, note?: string }} */
    let coresRun = { measured: false, workers: manyWorkers, generators }
    const onCoresLayout = async (/** @type {() => Promise<void>} */ body) => {
      if (pinned) for (const pid of [process.pid, context.backendPid]) pin(pid, cores.load)
      try {
        await body()
      } finally {
        if (pinned) for (const pid of [process.pid, context.backendPid]) pin(pid, LOAD_CPU)
      }
    }
    const cpuForCores = pinned ? cores.proxy : undefined
    /** Portal passthrough with `workers` threads on the cores layout's CPUs; more than one: each worker its own socket. */
    const workersPortal = async (/** @type {number} */ workers, /** @type {{ globals?: string, tables?: string, name: string }} */ extra) =>
      portalTarget({
        dir,
        port: await freePort(),
        backendPort,
        mode: "passthrough",
        cpu: cpuForCores,
        nodeFlags: portalFlags,
        workers,
        // Each worker its own socket, so that the kernel spreads connections evenly.
        globals: `${extra.globals ?? ""}${workers > 1 ? "so_reuseport = true\n" : ""}`,
        tables: extra.tables,
        name: extra.name
      })
    if (only.includes("cores") && chosen.includes("passthrough") && manyWorkers < 2) {
      coresRun = { ...coresRun, note: `n/a: the machine has ${cores.proxyCpus} CPU for the proxies` }
    } else if (only.includes("cores") && chosen.includes("passthrough")) {
      await onCoresLayout(async () => {
        /** @type {Array<import("./targets.mjs").Target>} */
        const coreTargets = []
        try {
          if ("binary" in haproxy) {
            for (const nbthread of [1, manyWorkers]) {
              coreTargets.push(
                await haproxyTarget({ binary: haproxy.binary, dir, port: await freePort(), backendPort, maxconn, cpu: cpuForCores, nbthread, name: `nbthread_${nbthread}` })
              )
            }
          }
          for (const workers of [1, manyWorkers]) coreTargets.push(await workersPortal(workers, { name: `workers_${workers}` }))
          started.push(...coreTargets)
          const size = (/** @type {{ warmMs: number, windowMs: number, count: number, concurrency: number }} */ plan) => ({ ...plan, generators })
          for (const target of coreTargets) await scenarios.connectionRate(context, target, { ...size(PLAN.rate), warmMs: 0, windowMs: PLAN.coresWarmMs })
          await interleave("coresRate", coreTargets, PLAN.coresRounds, (target) => scenarios.connectionRate(context, target, size(PLAN.rate)))
          await interleave("coresStatus", coreTargets, PLAN.coresRounds, (target) => scenarios.statusPings(context, target, size(PLAN.status)))
          // As many bulk connections as proxy threads: one connection is relayed by one thread.
          await interleave("coresBulk", coreTargets, PLAN.coresRounds, (target) =>
            scenarios.bulk(context, target, { ...size(PLAN.bulk), count: manyWorkers, generators: 1 })
          )
          // Startup RSS per worker count, each start fresh.
          for (const target of coreTargets.filter((target) => target.name.startsWith("workers_"))) {
            say(`startup RSS: ${target.name}`)
            results.startup[/** @type {any} */ (target.name)] = [await scenarios.startupRss(target, PLAN.startup)]
          }
          coresRun = { ...coresRun, measured: true }
        } finally {
          for (const target of coreTargets) {
            await target.stop()
            started.splice(started.indexOf(target), 1)
          }
        }
      })
    }
    if (only.includes("flood") && chosen.includes("passthrough")) {
      await onCoresLayout(async () => {
        for (const workers of process.env.BENCH_FLOOD_WORKERS ? [Number(process.env.BENCH_FLOOD_WORKERS)] : manyWorkers >= 2 ? [1, 2] : [1]) {
          const target = await workersPortal(workers, {
            globals: "receive_proxy_protocol = true\n",
            tables: "\n[rate_limit]\nenabled = true\n",
            name: `flood_${workers}`
          })
          started.push(target)
          try {
            say(`flood: ${workers} worker${workers === 1 ? "" : "s"}, ${PLAN.flood.windowMs / 1000} s`)
            results.flood[/** @type {any} */ (`workers_${workers}`)] = [await scenarios.flood(target, PLAN.flood)]
          } finally {
            await target.stop()
            started.splice(started.indexOf(target), 1)
          }
        }
      })
    }

    const available = {
      haproxy: "binary" in haproxy,
      haproxySplice: haproxySplice !== undefined,
      nativeGame: nativeEcho !== undefined,
      manyWorkers
    }
    const endCommit = git(["rev-parse", "--short", "HEAD"])
    const revision = endCommit === startRevision.commit ? startRevision.text : `${startRevision.text} (the branch moved to ${endCommit || "unknown"} during the run)`
    const facts = machine()
    const notes = [
      `- Machine: ${facts.cpu}, ${facts.cores} cores, ${facts.memoryGiB} GiB, Linux ${facts.kernel}, Node ${facts.node}; load average at the end ${facts.loadAverage}.`,
      `- HAProxy: ${"binary" in haproxy ? `${haproxy.version}, mode tcp, nbthread default, maxconn ${maxconn}, no splice options` : `n/a, ${haproxy.reason}`}` +
        `${haproxySplice === undefined ? "" : "; for the bulk rows \"HAProxy splicing\", a second HAProxy with option splice-request and option splice-response"}.`,
      `- Portal offline and client_only (packet modes): measured by the native game load (a real login into play, then frames of the compressed format; client_only also logs in online and encrypts) and the connection rate (client_only answering the Encryption Request, with a fake session service on CPU ${LOAD_CPU}); both forward with legacy forwarding.`,
      `- Portal: commit ${revision}, run as \`${["node", ...PORTAL_NODE_FLAGS, ...portalFlags, "dist/main.js"].join(" ")}\`, log level warn, [status_cache] ttl ${DEFAULT_STATUS_TTL} (1ms for the "asking the backend" row); zero_copy ${zeroCopy.available ? "splices" : `is unavailable (${zeroCopy.reason}) and relays as passthrough`}.`,
      pinned
        ? `- Each proxy pinned to CPU ${PROXY_CPU}; backend, load generators and orchestrator pinned to CPU ${LOAD_CPU}; ` +
          `except in the bulk rows "nothing pinned", where every process may run on any CPU. The targets use the pinned rows.`
        : "- Not pinned (taskset missing or a single CPU): proxies and load share the CPUs.",
      `- Game-shaped load: the rows "2. Game-shaped load" come from the Node.js generator and backend (bench/generator.mjs, bench/backend.mjs); ` +
        ("binary" in nativeLoad
          ? `the rows "2. Game-shaped load, native load" from the same traffic generated and echoed in C (bench/native/gameload.c), which the latency targets use.`
          : `the native load (bench/native/gameload.c) is n/a, ${nativeLoad.reason}, so the latency targets use the Node.js load.`),
      received === undefined
        ? "- Telemetry rows: not run (they need the passthrough target and the rate scenario)."
        : `- Telemetry rows: Portal passthrough without \`[telemetry]\` and with it enabled with its defaults (every login traced, pings sampled at 0.1, metrics every 15s), ` +
          `exporting over OTLP/gRPC (the default), and over OTLP/HTTP, to a receiver on CPU ${LOAD_CPU} that acknowledges without decoding (${received.requests} export requests, ` +
          `${(received.bytes / 2 ** 20).toFixed(1)} MiB over the run); each window in a Portal process started for it and given ${PLAN.telemetryWarmMs / 1000} s of the same load first.`,
      `- Rounds: ${PLAN.rounds} (connection rate ${PLAN.rateRounds}, game ${PLAN.gameRounds}, memory ${PLAN.memoryRounds}, multi-core ${PLAN.coresRounds}); medians of rounds. Open-files limit ${limits.hard}. ${ports.low === 0 ? "" : `Ephemeral ports ${ports.low}-${ports.high}`}${ports.widenedFrom === undefined ? "" : ` for the run (widened from ${ports.widenedFrom}: a proxy's TIME_WAIT sockets towards the backend filled that range within seconds of logins, and then every connect searched it; bench/system.mjs)`}.`,
      ...(only.includes("cores")
        ? [
            coresRun.note !== undefined
              ? `- Multi-core: ${coresRun.note}.`
              : `- Multi-core: HAProxy with nbthread 1 and ${manyWorkers}, Portal passthrough with worker_threads 1 and ${manyWorkers} (so_reuseport = true), ` +
                (cores.pinned
                  ? `pinned to CPUs ${cores.proxy}; backend, ${generators} load generator(s) and orchestrator on CPUs ${cores.load}.`
                  : `nothing pinned: the ${cores.proxyCpus} CPUs are shared by the proxy under test, the backend, ${generators} load generator(s) and the orchestrator, so the load takes CPU from the proxy and the figures are bounded by what the load side leaves it (docs/benchmarks.md).`) +
                ` Bulk: ${manyWorkers} connections. Startup RSS: ${PLAN.startup.settleMs / 1000} s after the port accepts, median of ${PLAN.startup.starts} start(s).`
          ]
        : []),
      ...(only.includes("flood")
        ? [
            `- Flood: Portal passthrough with receive_proxy_protocol and [rate_limit] enabled (defaults), worker_threads 1 and 2, laid out as the multi-core scenario; ` +
              `${PLAN.flood.windowMs / 1000} s of garbage and legacy pings (${PLAN.flood.concurrency} loops each), half handshakes and slowloris (${PLAN.flood.held} held connections each) ` +
              `from 60,000 PROXY v1 source addresses (bench/flood.mjs); RSS read every 250 ms; the real client pings every 250 ms and logs in every second.`
          ]
        : []),
      ...repeatNote(repeats)
    ]
    const report = renderReport({ smoke, results, available, notes })
    process.stdout.write(report)
    if (out !== undefined) {
      writeFileSync(out, report)
      writeFileSync(out.replace(/\.md$/, ".json"), `${JSON.stringify({ plan: PLAN, facts, results, repeats }, null, 2)}\n`)
      say(`wrote ${out}`)
    }
  } finally {
    await stopAll()
  }
}

main().catch((error) => {
  say(error instanceof Error ? (error.stack ?? error.message) : String(error))
  process.exit(1)
})
