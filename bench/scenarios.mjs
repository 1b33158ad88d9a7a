// @ts-check
/**
 * The five scenarios. Each measurement forks a fresh load generator, lets the load run for a warm-up, then reads
 * generator, backend and proxy counters at the start and the end of a timed window.
 */
import { fork } from "node:child_process"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import { client } from "./ipc.mjs"
import { nativeGenerator } from "./native.mjs"
import { cpuSeconds, everyProcessCpuSeconds, otherCpuSeconds, rssBytes, sleep, stealSeconds } from "./system.mjs"
import { DOMAIN } from "./targets.mjs"

const GENERATOR = fileURLToPath(new URL("./generator.mjs", import.meta.url))
const FLOOD = fileURLToPath(new URL("./flood.mjs", import.meta.url))
const GiB = 2 ** 30
const MiB = 2 ** 20

/**
 * @typedef {import("./targets.mjs").Target} Target
 * @typedef {{ ask: (cmd: string, args?: Record<string, unknown>) => Promise<any> }} Peer
 * @typedef {{ backend: Peer, backendPid: number }} Context
 * @typedef {{ warmMs: number, windowMs: number, count: number, concurrency: number, generators?: number }} Size
 *   generators: how many load generator processes share the load (1 unless given), each with `concurrency` loops
 */

/**
 * @typedef {Peer & { readonly pid: number, readonly pids?: ReadonlyArray<number>, end: () => Promise<void> }} Generator
 */

/** A load generator, a forked child (by default the Node.js one, generator.mjs). @returns {Generator} */
const forkGenerator = (file = GENERATOR) => {
  const child = fork(file, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] })
  const exited = new Promise((resolve) => child.once("exit", resolve))
  const peer = client(child, "generator")
  /** @type {Promise<void> | undefined} */
  let ending
  return {
    pid: /** @type {number} */ (child.pid),
    ask: peer.ask,
    end: () =>
      (ending ??= (async () => {
        await peer.ask("stop").catch(() => {})
        child.kill()
        await exited
      })())
  }
}

/**
 * `count` Node.js load generators as one: every request goes to each, and their snapshots are summed (the counters;
 * round-trip percentiles are not merged, and no scenario that reads them runs on more than one).
 * @param {number} count @returns {Generator}
 */
const forkGenerators = (count) => {
  if (count <= 1) return forkGenerator()
  const all = Array.from({ length: count }, () => forkGenerator())
  return {
    pid: /** @type {Generator} */ (all[0]).pid,
    pids: all.map((generator) => generator.pid),
    ask: async (cmd, args) => {
      const answers = await Promise.all(all.map((generator) => generator.ask(cmd, args)))
      if (cmd !== "snapshot") return answers[0]
      const sum = (/** @type {string} */ field) => answers.reduce((total, answer) => total + answer[field], 0)
      return {
        received: sum("received"),
        completed: sum("completed"),
        errors: sum("errors"),
        open: sum("open"),
        firstError: answers.find((answer) => answer.firstError !== undefined)?.firstError
      }
    },
    end: async () => {
      await Promise.all(all.map((generator) => generator.end()))
    }
  }
}

/**
 * Runs `body` with a new generator; afterwards waits until the backend has seen every connection close, so the
 * next measurement starts from nothing.
 * @template A
 * @param {Context} context @param {(generator: Generator) => Promise<A>} body @param {() => Generator} [makeGenerator]
 * @returns {Promise<A>}
 */
const withGenerator = async (context, body, makeGenerator = () => forkGenerator()) => {
  const generator = makeGenerator()
  try {
    return await body(generator)
  } finally {
    await generator.end()
    for (let waited = 0; waited < 10_000 && (await context.backend.ask("snapshot")).open > 0; waited += 50) await sleep(50)
  }
}

/** @param {Context} context @param {Generator} generator @param {Target} target */
const read = async (context, generator, target) => {
  const [load, backend] = await Promise.all([generator.ask("snapshot"), context.backend.ask("snapshot")])
  const pid = target.pid()
  const cpu = pid === undefined ? undefined : cpuSeconds(pid)
  const bench = [process.pid, ...(generator.pids ?? [generator.pid]), context.backendPid, ...(pid === undefined ? [] : [pid])]
  return { at: performance.now(), load, backend, cpu, bench, processes: everyProcessCpuSeconds(), steal: stealSeconds() }
}

/**
 * Starts the load, waits the warm-up, and returns the readings at both ends of the window.
 * @param {Context} context @param {Target} target @param {Size} size @param {Record<string, unknown>} load
 * @param {{ port: number, host: string, makeGenerator?: () => Generator }} [to] where the load goes, and by which generator
 */
const timed = (context, target, size, load, to = { port: target.port, host: DOMAIN }) =>
  withGenerator(
    context,
    async (generator) => {
      await generator.ask("start", { port: to.port, host: to.host, count: size.count, concurrency: size.concurrency, ...load })
      await sleep(size.warmMs)
      const before = await read(context, generator, target)
      await sleep(size.windowMs)
      const after = await read(context, generator, target)
      const seconds = (after.at - before.at) / 1000
      const cpu = before.cpu === undefined || after.cpu === undefined ? undefined : after.cpu - before.cpu
      // What other processes on the machine ran during the window, and what the hypervisor took: both disturb it.
      const elsewhere = {
        otherPercent: (otherCpuSeconds(before.processes, after.processes, after.bench) / seconds) * 100,
        stealPercent: ((after.steal - before.steal) / seconds) * 100
      }
      return { before, after, seconds, cpu, elsewhere, errors: after.load.errors, firstError: after.load.firstError }
    },
    to.makeGenerator ?? (() => forkGenerators(size.generators ?? 1))
  )

/** @param {Context} context @param {Target} target @param {Size} size */
export const bulk = async (context, target, size) => {
  const run = await timed(context, target, size, { mode: "bulk" })
  const bytes =
    run.after.load.received - run.before.load.received + run.after.backend.bulkReceived - run.before.backend.bulkReceived
  return {
    mibPerSecond: bytes / MiB / run.seconds,
    cpuPerGiB: run.cpu === undefined ? undefined : run.cpu / (bytes / GiB),
    ...run.elsewhere,
    errors: run.errors,
    firstError: run.firstError
  }
}

/** @param {Awaited<ReturnType<typeof timed>>} run */
const gameSample = (run) => {
  const rtt = run.after.load.rtt
  return {
    sessions: run.after.load.open,
    packets: rtt.count,
    p50: rtt.p50,
    p99: rtt.p99,
    cpuPercent: run.cpu === undefined ? undefined : (run.cpu / run.seconds) * 100,
    ...run.elsewhere,
    errors: run.errors,
    firstError: run.firstError
  }
}

/** @param {Context} context @param {Target} target @param {Size} size */
export const game = async (context, target, size) => gameSample(await timed(context, target, size, { mode: "game" }))

/**
 * The same game-shaped load from the native generator, echoed by the native backend (`context` has it, and
 * `target.game` is where the proxy relays to it).
 * @param {Context} context @param {Target} target @param {Size} size @param {string} binary
 */
export const gameNative = async (context, target, size, binary) => {
  if (target.game === undefined) throw new Error(`${target.name} has no route to the native echo backend`)
  const { port, host, flavour } = target.game
  return gameSample(await timed(context, target, size, {}, { port, host, makeGenerator: () => nativeGenerator(binary, flavour) }))
}

/** @param {Context} context @param {Target} target @param {Size} size @param {"rate" | "status"} mode */
const perSecond = async (context, target, size, mode) => {
  // client_only: the generator logs in online (Encryption Response, then encrypted bytes).
  const run = await timed(context, target, size, { mode, online: target.name === "client_only" })
  return {
    perSecond: (run.after.load.completed - run.before.load.completed) / run.seconds,
    cpuPercent: run.cpu === undefined ? undefined : (run.cpu / run.seconds) * 100,
    ...run.elsewhere,
    errors: run.errors,
    firstError: run.firstError
  }
}

/** @param {Context} context @param {Target} target @param {Size} size */
export const connectionRate = (context, target, size) => perSecond(context, target, size, "rate")

/** @param {Context} context @param {Target} target @param {Size} size */
export const statusPings = (context, target, size) => perSecond(context, target, size, "status")

/**
 * RSS of a freshly started proxy before and after `size.count` idle sessions. A few sessions opened and closed
 * first take the one-time costs (code compiled on first use, buffers) out of the difference.
 * @param {Context} context @param {Target} target @param {Size} size
 */
export const memory = async (context, target, size) => {
  await target.restart()
  const pid = /** @type {number} */ (target.pid())
  const idle = { mode: "idle", port: target.port, host: DOMAIN, concurrency: size.concurrency }
  await withGenerator(context, (generator) => generator.ask("start", { ...idle, count: Math.min(200, size.count) }))
  await sleep(size.warmMs)
  const before = rssBytes(pid)
  return withGenerator(context, async (generator) => {
    const opened = await generator.ask("start", { ...idle, count: size.count })
    await sleep(size.warmMs)
    const after = rssBytes(pid)
    const { errors, firstError } = await generator.ask("snapshot")
    return { sessions: opened, beforeMiB: before / MiB, afterMiB: after / MiB, perSessionKiB: (after - before) / 1024 / opened, errors, firstError }
  })
}

/** @param {Array<number>} values */
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? /** @type {number} */ (sorted[middle]) : (/** @type {number} */ (sorted[middle - 1]) + /** @type {number} */ (sorted[middle])) / 2
}

/**
 * RSS of a freshly started proxy `settleMs` after it accepts connections, the median of `starts` starts (Portal gives
 * back the heap its startup grew once it listens: src/services/runtime/shrinkHeap.ts).
 * @param {Target} target @param {{ settleMs: number, starts: number }} size
 */
export const startupRss = async (target, size) => {
  /** @type {Array<number>} */
  const samples = []
  for (let start = 0; start < size.starts; start++) {
    await target.restart()
    await sleep(size.settleMs)
    samples.push(rssBytes(/** @type {number} */ (target.pid())))
  }
  return { startupMiB: median(samples) / MiB, minMiB: Math.min(...samples) / MiB, maxMiB: Math.max(...samples) / MiB }
}

/**
 * The hostile flood (flood.mjs) against a Portal that takes PROXY headers and has `[rate_limit]` on, from a fresh
 * start: its RSS once idle, at its highest while the flood runs (read every 250 ms), and a second after it stopped;
 * and what a real client (the probe) saw meanwhile.
 * @param {Target} target @param {{ settleMs: number, windowMs: number, concurrency: number, held: number }} size
 */
export const flood = async (target, size) => {
  await target.restart()
  const pid = /** @type {number} */ (target.pid())
  await sleep(size.settleMs)
  const idle = rssBytes(pid)
  const probe = forkGenerator(FLOOD)
  const load = forkGenerator(FLOOD)
  try {
    await probe.ask("start", { mode: "probe", port: target.port, host: DOMAIN })
    await load.ask("start", { mode: "flood", port: target.port, host: DOMAIN, concurrency: size.concurrency, held: size.held })
    const started = performance.now()
    let peak = idle
    while (performance.now() - started < size.windowMs) {
      await sleep(250)
      peak = Math.max(peak, rssBytes(pid))
    }
    const seconds = (performance.now() - started) / 1000
    const sent = await load.ask("snapshot")
    await load.end()
    await sleep(1000)
    const after = rssBytes(pid)
    const seen = (await probe.ask("snapshot")).probe
    const connections = sent.garbage + sent.legacy + sent.half + sent.slowloris
    return {
      idleMiB: idle / MiB,
      peakMiB: peak / MiB,
      growthMiB: (peak - idle) / MiB,
      afterMiB: after / MiB,
      connectionsPerSecond: connections / seconds,
      legacyAnswered: sent.legacyAnswered,
      probeServed: seen.pings + seen.logins,
      probeFailed: seen.failed,
      probeSlowestMs: seen.slowestMs,
      errors: seen.failed,
      firstError: seen.firstFailure
    }
  } finally {
    await load.end()
    await probe.end()
  }
}
