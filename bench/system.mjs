// @ts-check
/** What the bench reads from and asks of Linux: process CPU time and RSS, CPU pinning, the open-files limit. */
import { spawnSync } from "node:child_process"
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import * as os from "node:os"

const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100

/**
 * A process's name, start time (clock ticks after boot) and CPU seconds (user plus system, all threads) from the
 * text of /proc/<pid>/stat.
 * @param {string} stat
 */
const parseStat = (stat) => {
  // Fields after the command name (which may contain spaces): state is field 3, utime 14, stime 15, starttime 22.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return {
    name: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")),
    started: Number(fields[19]),
    seconds: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  }
}

/** User plus system CPU seconds of a process, all threads, from /proc/<pid>/stat. @param {number} pid */
export const cpuSeconds = (pid) => parseStat(readFileSync(`/proc/${pid}/stat`, "utf8")).seconds

/**
 * Name, start time and CPU seconds of every process on the machine, the kernel's threads included, by pid. A
 * process that exits while the list is read is left out.
 * @returns {Map<number, { name: string, started: number, seconds: number }>}
 */
export const everyProcessCpuSeconds = () => {
  const byPid = new Map()
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      byPid.set(Number(entry), parseStat(readFileSync(`/proc/${entry}/stat`, "utf8")))
    } catch {
      // gone meanwhile
    }
  }
  return byPid
}

/**
 * CPU seconds that processes other than `bench` ran between two readings of everyProcessCpuSeconds(). The
 * kernel's softirq threads are left out: on this machine they process the bench's own loopback packets.
 * @param {ReturnType<typeof everyProcessCpuSeconds>} before @param {ReturnType<typeof everyProcessCpuSeconds>} after
 * @param {ReadonlyArray<number>} bench
 */
export const otherCpuSeconds = (before, after, bench) => {
  let total = 0
  for (const [pid, { name, started, seconds }] of after) {
    if (bench.includes(pid) || name.startsWith("ksoftirqd/")) continue
    const earlier = before.get(pid)
    // A pid met only afterwards, or with another start time (a reused pid), is a process started during the
    // window: all its time is new. Names do not tell: a kernel worker's changes with the work it does.
    total += earlier !== undefined && earlier.started === started ? Math.max(0, seconds - earlier.seconds) : seconds
  }
  return total
}

/** CPU seconds the whole machine lost to the hypervisor (steal), from /proc/stat. */
export const stealSeconds = () => {
  const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]?.trim().split(/\s+/).slice(1).map(Number) ?? []
  return (fields[7] ?? 0) / CLOCK_TICKS
}

/** Resident set size in bytes, from /proc/<pid>/status. @param {number} pid */
export const rssBytes = (pid) => {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  if (match === null) throw new Error(`no VmRSS for process ${pid}`)
  return Number(match[1]) * 1024
}

/** Whether `taskset` can pin processes here (util-linux, and an affinity the kernel accepts). */
export const canPin = () => os.cpus().length >= 2 && spawnSync("taskset", ["-c", "0", "true"]).status === 0

/**
 * Pins every thread of a running process to CPUs (one, or a list such as `0-1`); threads and children it starts
 * later inherit it.
 * @param {number} pid @param {number | string} cpus
 */
export const pin = (pid, cpus) => {
  const result = spawnSync("taskset", ["-a", "-p", "-c", String(cpus), String(pid)], { encoding: "utf8" })
  if (result.status !== 0) throw new Error(`taskset failed: ${result.stderr}`)
}

/** Every CPU of the machine, as taskset names them. */
export const allCpus = () => `0-${os.cpus().length - 1}`

/**
 * Where the multi-core and flood scenarios put proxies and load. With 4 CPUs or more, the load (orchestrator,
 * backend, generators) on the lower half and the proxies on the upper half, so that a proxy with `proxyCpus` threads
 * has a core for each; with 2 or 3, nothing is pinned and proxies and load share every CPU (pinning two proxy threads
 * to one CPU would measure nothing multi-core).
 * @returns {{ pinned: boolean, load: string, proxy: string, proxyCpus: number, loadCpus: number }}
 */
export const coresPlan = () => {
  const cpus = os.cpus().length
  if (cpus >= 4 && canPin()) {
    const half = Math.floor(cpus / 2)
    return { pinned: true, load: `0-${half - 1}`, proxy: `${half}-${cpus - 1}`, proxyCpus: cpus - half, loadCpus: half }
  }
  return { pinned: false, load: allCpus(), proxy: allCpus(), proxyCpus: cpus, loadCpus: cpus }
}

/**
 * The open-files limit of this process (children inherit it), raised first: to `wanted` where the process may raise
 * its hard limit (root, or CAP_SYS_RESOURCE), else the soft limit to the hard one.
 * @param {number} wanted
 */
export const raiseFileLimit = (wanted) => {
  const read = () => {
    const match = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(readFileSync("/proc/self/limits", "utf8"))
    if (match === null) throw new Error("cannot read the open-files limit")
    const value = (/** @type {string} */ text) => (text === "unlimited" ? Number.MAX_SAFE_INTEGER : Number(text))
    return { soft: value(/** @type {string} */ (match[1])), hard: value(/** @type {string} */ (match[2])) }
  }
  const before = read()
  const set = (/** @type {number} */ limit) => spawnSync("prlimit", ["--pid", String(process.pid), `--nofile=${limit}:${limit}`]).status === 0
  if (before.hard < wanted && set(wanted)) return read()
  if (before.soft < before.hard) set(before.hard)
  return read()
}

const PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
/** The widest ephemeral port range Linux takes; the bench's listeners are on ports the OS picked, in whatever range. */
const WIDE_PORTS = { low: 1024, high: 65535 }

/**
 * The ephemeral port range, widened where the bench may (root) for the run. Each login a proxy relays ends with the
 * proxy closing its backend connection first, so it leaves a TIME_WAIT socket for 60 s on the one address pair proxy
 * to backend: at a few thousand logins a second the default range (32768 to 60999) fills, and from then on every
 * connect(2) searches the range for a port it may reuse. Measured with Portal at about 2,500 logins a second: 250 to
 * 300 µs of CPU per login until about 55,000 sockets waited, then 420 to 510 µs; with the wide range, 260 µs
 * throughout (the kernel's cap on waiting sockets, 131,072 by default, then frees ports before the range runs out).
 * HAProxy leaves the same sockets. `restore` puts the range back as it was.
 * @returns {{ low: number, high: number, widenedFrom: string | undefined, restore: () => void }}
 */
export const widenEphemeralPorts = () => {
  /** @returns {{ low: number, high: number } | undefined} */
  const read = () => {
    try {
      const [low, high] = readFileSync(PORT_RANGE, "utf8").trim().split(/\s+/).map(Number)
      return low === undefined || high === undefined || !Number.isInteger(low) || !Number.isInteger(high) ? undefined : { low, high }
    } catch {
      return undefined
    }
  }
  const before = read()
  if (before === undefined) return { low: 0, high: 0, widenedFrom: undefined, restore: () => {} }
  if (before.low <= WIDE_PORTS.low && before.high >= WIDE_PORTS.high) return { ...before, widenedFrom: undefined, restore: () => {} }
  try {
    writeFileSync(PORT_RANGE, `${WIDE_PORTS.low} ${WIDE_PORTS.high}\n`)
  } catch {
    return { ...before, widenedFrom: undefined, restore: () => {} }
  }
  const after = read() ?? before
  let restored = false
  const restore = () => {
    if (restored) return
    restored = true
    try {
      writeFileSync(PORT_RANGE, `${before.low} ${before.high}\n`)
    } catch {
      // Left wide: nothing the bench can do about it.
    }
  }
  return { ...after, widenedFrom: `${before.low}-${before.high}`, restore }
}

/** A port free on loopback now (the OS picks it). */
export const freePort = () =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = /** @type {net.AddressInfo} */ (server.address())
      server.close(() => resolve(port))
    })
  })

/** Resolves once something accepts connections on the port. @param {number} port @param {() => string | undefined} dead */
export const waitForPort = async (port, dead, timeoutMs = 20_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const reason = dead()
    if (reason !== undefined) throw new Error(reason)
    const open = await new Promise((resolve) => {
      const socket = net.connect(port, "127.0.0.1")
      socket.once("connect", () => {
        socket.destroy()
        resolve(true)
      })
      socket.once("error", () => resolve(false))
    })
    if (open) return
    if (Date.now() > deadline) throw new Error(`nothing listens on port ${port} after ${timeoutMs} ms`)
    await sleep(100)
  }
}

/** @param {number} ms */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The facts a reader needs to compare results between machines. */
export const machine = () => {
  const cpus = os.cpus()
  return {
    cpu: cpus[0]?.model ?? "unknown",
    cores: cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    node: process.version,
    loadAverage: os.loadavg().map((value) => value.toFixed(2)).join(" ")
  }
}
