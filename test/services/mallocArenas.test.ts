/** The addon's cap on malloc arenas, which WorkerPool sets before it starts worker threads. */
import { spawnSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import { limitMallocArenas, loadNativeAddon } from "../../src/services/native/addon.js"

const loaded = loadNativeAddon()
const glibc = spawnSync("ldd", ["--version"], { encoding: "utf8" }).stdout?.includes("GLIBC") === true

describe.skipIf(!("addon" in loaded) || !glibc)("malloc arenas", () => {
  it("are capped where glibc is the C library; a count of 0 is refused", () => {
    expect(limitMallocArenas(0)).toBe(false)
    // A child process, so that the cap does not stay on the test runner's threads.
    const child = spawnSync(
      process.execPath,
      ["--input-type=module", "-e", 'import("./dist/services/native/addon.js").then((m) => console.log(m.limitMallocArenas(2)))'],
      { encoding: "utf8" }
    )
    expect(child.stdout.trim()).toBe("true")
  })
})
