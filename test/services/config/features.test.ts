/** What the startup log and --check say of worker_threads and so_reuseport where they cannot have their effect. */
import { Schema } from "effect"
import { availableParallelism } from "node:os"
import { describe, expect, it, vi } from "vitest"
import { GlobalConfig } from "../../../src/schema/GlobalConfig.js"

const listening = vi.hoisted(() => ({ noWorkers: undefined as string | undefined, noReusePort: undefined as string | undefined }))
vi.mock("../../../src/services/workers/listening.js", () => ({
  workerThreadsUnsupported: () => listening.noWorkers,
  reusePortUnsupported: () => listening.noReusePort
}))
/** The cores `availableParallelism` reports (undefined: the machine's). */
const cores = vi.hoisted(() => ({ count: undefined as number | undefined }))
vi.mock("node:os", async (importOriginal) => {
  const os = await importOriginal<typeof import("node:os")>()
  return { ...os, availableParallelism: () => cores.count ?? os.availableParallelism() }
})
const { inactiveFeatures } = await import("../../../src/services/config/features.js")

const global = (input: Record<string, unknown>) => Schema.decodeUnknownSync(GlobalConfig)(input)
const said = (input: Record<string, unknown>) => inactiveFeatures(global(input), []).map(({ where, what }) => `${where}: ${what}`)

describe("inactiveFeatures: threads and sockets", () => {
  it("without a way to share the address: one thread, and so_reuseport has no effect (not 'the workers share a socket')", () => {
    listening.noWorkers = "worker threads need the native addon"
    listening.noReusePort = "it needs the native addon"
    expect(said({ worker_threads: 2, so_reuseport: true })).toEqual([
      "worker_threads: asks for 2 workers, but worker threads need the native addon; Portal runs on one thread",
      "so_reuseport: has no effect: Portal runs on one thread (see worker_threads)"
    ])
    // Not set at all: the line says it is the default that asks, not the operator.
    expect(said({}).filter((line) => line.startsWith("worker_threads"))).toEqual(
      availableParallelism() > 1
        ? [`worker_threads: the default (0: one per core) asks for ${availableParallelism()} workers, but worker threads need the native addon; Portal runs on one thread`]
        : []
    )
  })

  it("workers without SO_REUSEPORT share one socket", () => {
    listening.noWorkers = undefined
    listening.noReusePort = "this system refuses it (ENOPROTOOPT)"
    expect(said({ worker_threads: 2, so_reuseport: true })).toEqual([
      "so_reuseport: SO_REUSEPORT is unavailable: this system refuses it (ENOPROTOOPT); the workers share one listening socket"
    ])
  })

  it("says nothing when both work, and that so_reuseport does nothing on one thread", () => {
    listening.noWorkers = undefined
    listening.noReusePort = undefined
    expect(said({ worker_threads: 2, so_reuseport: true })).toEqual([])
    expect(said({ worker_threads: 1, so_reuseport: true })).toEqual(["so_reuseport: has no effect with one thread (worker_threads = 1)"])
  })

  it("on one core, the default (0) is one thread, and the line says so as configured", () => {
    listening.noWorkers = undefined
    listening.noReusePort = undefined
    cores.count = 1
    try {
      expect(said({ worker_threads: 0, so_reuseport: true })).toEqual([
        "so_reuseport: has no effect with one thread (worker_threads = 0: one per core, and there is one core)"
      ])
    } finally {
      cores.count = undefined
    }
  })
})
