/** `npm run bench -- --smoke` runs every scenario end to end; the numbers themselves are never asserted. */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { DISTURBED_PERCENT, MAX_REPEATS, measureUndisturbed, repeatNote } from "../bench/disturbance.mjs"
import { everyProcessCpuSeconds, otherCpuSeconds } from "../bench/system.mjs"

const SCENARIO_ROWS = [
  "| 1. Bulk relay | throughput",
  "| 1. Bulk relay | proxy CPU per GiB",
  "| 1. Bulk relay | throughput, HAProxy splicing",
  "| 1. Bulk relay | throughput, nothing pinned (MiB/s)",
  "| 1. Bulk relay | throughput, nothing pinned, HAProxy splicing",
  "| 2. Game-shaped load | round trip p99",
  "| 2. Game-shaped load | added p99 over direct",
  "| 2. Game-shaped load, native load | round trip p99",
  "| 2. Game-shaped load, native load | added p99 over direct",
  "| 3. Connection rate | logins per second",
  "| 3. Connection rate | logins per second, telemetry on",
  "| 4. Status pings | pings per second, Portal from its cache",
  "| 4. Status pings | pings per second, Portal asking the backend",
  "| 5. Memory | proxy RSS per idle session"
]

describe.skipIf(process.platform !== "linux")("bench smoke run", () => {
  it("runs every scenario against every target and prints the report", { timeout: 300_000 }, async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ["bench/run.mjs", "--smoke"], {
      timeout: 270_000,
      maxBuffer: 1 << 20
    })
    for (const row of SCENARIO_ROWS) expect(stdout).toContain(row)
    expect(stdout).toMatch(/\| Target \| Measured \| Result \|/)
    expect(stdout).toMatch(/RSS per idle session < 16 KiB \| [^|]+ \| (PASS|MISS|n\/a) \|/)
    // The native load is built with the system C compiler, which `npm ci` needs for the splice addon too: it ran, so
    // its round trips are numbers and the latency target is judged on it.
    expect(stdout).toMatch(/\| 2\. Game-shaped load, native load \| round trip p99 \(ms\) \| \d+\.\d{3} \| (?:\d+\.\d{3}|n\/a) \| \d+\.\d{3} \| \d+\.\d{3} \|/)
    expect(stdout).toMatch(/\| zero_copy game p99 added latency < 1 ms \(native load\) \| -?\d+\.\d{3} ms \| (PASS|MISS) \|/)
    // The packet modes: their native game load (framed, and encrypted with libcrypto) and their logins ran.
    expect(stdout).toMatch(/\| offline game p99 added latency < 1 ms \(native load\) \| -?\d+\.\d{3} ms \| (PASS|MISS) \|/)
    expect(stdout).toMatch(/\| client_only game p99 added latency < 1 ms \(native load\) \| -?\d+\.\d{3} ms \| (PASS|MISS) \|/)
    expect(stdout).toMatch(/\| offline game proxy CPU ≤ 2× passthrough \(native load\) \| \d+\.\d{2}× passthrough \| (PASS|MISS) \|/)
    expect(stdout).toMatch(/\| client_only logins ≥ 1,000\/s \(one core\) \| [\d,]+\/s \| (PASS|MISS) \|/)
    // The telemetry row: Portal exported its traces and metrics to the bench's receiver.
    expect(stdout).toMatch(/\| passthrough logins\/s with telemetry on ≥ 0\.9× off \| \d+\.\d{2}× off \| (PASS|MISS) \|/)
    expect(stdout).toMatch(/Telemetry rows: .* \([1-9]\d* export requests/)
    expect(stdout).toContain("| 3. Connection rate | logins per second, telemetry on over OTLP/HTTP")
    // What the ratio divides by: the same Portal with telemetry off, measured in the same rounds (a number, not n/a).
    expect(stdout).toMatch(/\| 3\. Connection rate \| logins per second, telemetry off \(fresh processes\) \| — \| — \| [\d,]+ \|/)
    // The multi-core scenario (HAProxy and Portal with one thread and with two) and the flood, with their targets.
    expect(stdout).toMatch(/\| logins per second \| [\d,]+ \| [\d,]+ \| [\d,]+ \| [\d,]+ \| \d+\.\d{2}× \| \d+\.\d{2}× \|/)
    expect(stdout).toMatch(/\| Portal 2 workers connection rate ≥ 1\.6× Portal 1 worker \| \d+\.\d{2}× Portal 1 worker \| (PASS|MISS) \|/)
    expect(stdout).toMatch(/\| Portal startup RSS, 1 worker ≤ 64 MiB \| \d+\.\d MiB \| (PASS|MISS) \|/)
    expect(stdout).toMatch(/\| flood RSS growth ≤ 32 MiB, 2 workers \| \d+\.\d MiB \| (PASS|MISS) \|/)
    expect(stdout).toMatch(/\| flood: the real client served throughout, 1 worker \| \d+ failed \| (PASS|MISS) \|/)
    expect(stdout).toMatch(/\| real client: attempts served \| [1-9][\d,]* \| [1-9][\d,]* \|/)
  })
})

describe("windows disturbed by the machine", () => {
  /** A measurement that returns the given samples in turn, and counts its calls. */
  const sequence = (samples: Array<Record<string, number>>) => {
    let calls = 0
    return {
      measure: async () => samples[Math.min(calls++, samples.length - 1)]!,
      calls: () => calls
    }
  }

  it("an undisturbed window is measured once", async () => {
    const run = sequence([{ value: 1, stealPercent: 1, otherPercent: 2 }])
    const { sample, attempts } = await measureUndisturbed(run.measure)
    expect(sample.value).toBe(1)
    expect(attempts).toEqual([3])
    expect(run.calls()).toBe(1)
  })

  it("a disturbed window is measured again until one is not, and that one is kept", async () => {
    const run = sequence([
      { value: 1, stealPercent: 30, otherPercent: 0 },
      { value: 2, stealPercent: 0, otherPercent: 1 }
    ])
    const { sample, attempts } = await measureUndisturbed(run.measure)
    expect(sample.value).toBe(2)
    expect(attempts).toEqual([30, 1])
  })

  it("stops after the bounded repeats and keeps the least disturbed attempt, whatever its result", async () => {
    const run = sequence([
      { value: 100, stealPercent: 40 },
      { value: 1, stealPercent: 12 },
      { value: 50, stealPercent: 20 }
    ])
    const { sample, attempts } = await measureUndisturbed(run.measure)
    expect(run.calls()).toBe(1 + MAX_REPEATS)
    expect(sample.value).toBe(1)
    expect(attempts).toEqual([40, 12, 20])
  })

  it("measures once with no repeats allowed (smoke runs), and negative readings count as none", async () => {
    const run = sequence([{ value: 1, stealPercent: 90, otherPercent: -3 }])
    const { attempts } = await measureUndisturbed(run.measure, 0)
    expect(attempts).toEqual([90])
    expect(run.calls()).toBe(1)
  })

  it("the report names each repeated window and says which stayed disturbed", () => {
    expect(repeatNote([])).toEqual([])
    const [line] = repeatNote([
      { scenario: "game", target: "haproxy", round: 1, attempts: [17, 2] },
      { scenario: "bulk", target: "zero_copy", round: 0, attempts: [40, 30, 20] }
    ])
    expect(line).toContain(`more than ${DISTURBED_PERCENT}% of a core`)
    expect(line).toContain("game haproxy round 2 (17%, 2%)")
    expect(line).toContain("bulk zero_copy round 1 (40%, 30%, 20%)")
    expect(line).toContain("1 of them stayed disturbed in every attempt")
  })
})

describe("other load during a window", () => {
  const processes = (entries: Array<[number, string, number, number?]>) =>
    new Map(entries.map(([pid, name, seconds, started = 1]) => [pid, { name, started, seconds }]))

  it("counts what processes outside the bench ran, not the bench's own nor the softirq threads", () => {
    const before = processes([
      [1, "init", 5],
      [10, "node", 100],
      [11, "gameload", 3],
      [12, "haproxy", 40],
      [13, "ksoftirqd/1", 7]
    ])
    const after = processes([
      [1, "init", 5.25],
      [10, "node", 104],
      [11, "gameload", 5],
      [12, "haproxy", 40.5],
      [13, "ksoftirqd/1", 9],
      [20, "cron", 0.125, 900]
    ])
    // init 0.25, the idle haproxy 0.5 and the new cron 0.125; the bench's node and gameload and ksoftirqd are left out.
    expect(otherCpuSeconds(before, after, [10, 11])).toBeCloseTo(0.875)
  })

  it("takes a reused pid as a new process, follows one whose name changed, and never counts time backwards", () => {
    const before = processes([
      [30, "sshd", 50, 100],
      [31, "node", 9],
      [32, "kworker/0:2-events", 3, 50]
    ])
    const after = processes([
      [30, "bash", 0.2, 7000],
      [31, "node", 8],
      [32, "kworker/0:2-mm_percpu_wq", 3.01, 50]
    ])
    expect(otherCpuSeconds(before, after, [])).toBeCloseTo(0.21)
  })

  it.skipIf(process.platform !== "linux")("reads every process of this machine, this one included", () => {
    const all = everyProcessCpuSeconds()
    // This process has run for more than one clock tick by now.
    expect(all.get(process.pid)?.seconds).toBeGreaterThan(0)
    expect(all.get(1)?.name).toMatch(/\S/)
  })
})
