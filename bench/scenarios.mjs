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
const GiB = 2 ** 30
const MiB = 2 ** 20

/**
 * @typedef {import("./targets.mjs").Target} Target
 * @typedef {{ ask: (cmd: string, args?: Record<string, unknown>) => Promise<any> }} Peer
 * @typedef {{ backend: Peer, backendPid: number }} Context
 * @typedef {{ warmMs: number, windowMs: number, count: number, concurrency: number }} Size
 */

/**
 * @typedef {Peer & { readonly pid: number, end: () => Promise<void> }} Generator
 */

/** The Node.js load generator, a forked child. @returns {Generator} */
const forkGenerator = () => {
  const child = fork(GENERATOR, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] })
  const exited = new Promise((resolve) => child.once("exit", resolve))
  const peer = client(child, "generator")
  return {
    pid: /** @type {number} */ (child.pid),
    ask: peer.ask,
    end: async () => {
      await peer.ask("stop").catch(() => {})
      child.kill()
      await exited
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
const withGenerator = async (context, body, makeGenerator = forkGenerator) => {
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
  const bench = [process.pid, generator.pid, context.backendPid, ...(pid === undefined ? [] : [pid])]
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
    to.makeGenerator
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
