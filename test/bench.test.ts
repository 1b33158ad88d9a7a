/** `npm run bench -- --smoke` runs every scenario end to end; the numbers themselves are never asserted. */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"

const SCENARIO_ROWS = [
  "| 1. Bulk relay | throughput",
  "| 1. Bulk relay | proxy CPU per GiB",
  "| 1. Bulk relay | throughput, HAProxy splicing",
  "| 1. Bulk relay | throughput, nothing pinned (MiB/s)",
  "| 1. Bulk relay | throughput, nothing pinned, HAProxy splicing",
  "| 2. Game-shaped load | round trip p99",
  "| 2. Game-shaped load | added p99 over direct",
  "| 3. Connection rate | logins per second",
  "| 4. Status pings | pings per second, Portal from its cache",
  "| 4. Status pings | pings per second, Portal asking the backend",
  "| 5. Memory | proxy RSS per idle session"
]

describe.skipIf(process.platform !== "linux")("bench smoke run", () => {
  it("runs every scenario against every target and prints the report", { timeout: 150_000 }, async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ["bench/run.mjs", "--smoke"], {
      timeout: 120_000,
      maxBuffer: 1 << 20
    })
    for (const row of SCENARIO_ROWS) expect(stdout).toContain(row)
    expect(stdout).toMatch(/\| Target \| Measured \| Result \|/)
    expect(stdout).toMatch(/RSS per idle session < 16 KiB \| [^|]+ \| (PASS|MISS|n\/a) \|/)
  })
})
