/** The memory the shared state costs, measured in a fresh process against what SharedState.ts's header says. */
import { execFileSync } from "node:child_process"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Compiled, compileForThreads } from "./compile.js"

let compiled: Compiled

beforeAll(() => {
  compiled = compileForThreads(["test/services/shared/memory.child.ts"])
})
afterAll(() => compiled.remove())

/** SharedState.ts: 60,000 addresses with one event each cost 8.4 MB. */
const DOCUMENTED_60K = 8.4e6

describe.skipIf(process.platform !== "linux")("shared state memory", () => {
  it("an empty state costs next to nothing; 60,000 addresses with one event cost what the header says", () => {
    const output = execFileSync(process.execPath, ["--expose-gc", compiled.file("test/services/shared/memory.child.ts")], {
      encoding: "utf8",
      timeout: 20_000
    })
    process.stdout.write(output)
    const measured = JSON.parse(output) as { empty: number; filled: number; stats: { addresses: number; storedEvents: number } }
    expect(measured.stats).toMatchObject({ addresses: 60_000, storedEvents: 60_000 })
    expect(measured.empty).toBeLessThan(64 * 1024)
    expect(measured.filled).toBeGreaterThan(DOCUMENTED_60K * 0.75)
    expect(measured.filled).toBeLessThan(DOCUMENTED_60K * 1.25)
  })
})
