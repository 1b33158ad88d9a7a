/**
 * Without `[telemetry]` no OpenTelemetry code is loaded: nothing main.ts (or a worker thread's entry) loads at start
 * reaches the SDK's modules, and a running Portal that served a ping and a login has none of them in its process.
 * The telemetry layer imports them on demand (layers/Telemetry.ts), only when `[telemetry]` is enabled; then they are
 * there, which shows the process check can see them.
 */
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { SRC, staticallyLoaded } from "../helpers/staticImports.js"
import { startPortal } from "../helpers/process.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { join, ping, startBackend } from "../peers/minecraft.js"

const PRELOAD = path.resolve("test/peers/loadedModules.mjs")

const OTEL = /@opentelemetry\/|@effect\/opentelemetry|@grpc\//
/** The bundle's chunk of the telemetry layer (scripts/bundle.mjs), which has @effect/opentelemetry inside. */
const TELEMETRY_CHUNK = /dist\/chunks\/TelemetrySdk-[A-Z0-9]+\.js$/
/** The SDK side of telemetry: everything under services/telemetry/ but the data plane's record, and its layer. */
const sdkSide = (file: string) =>
  file === path.join("layers", "TelemetrySdk.ts") ||
  (file.startsWith(path.join("services", "telemetry") + path.sep) && file !== path.join("services", "telemetry", "connectionTrace.ts"))

describe("telemetry's code", () => {
  it("is not loaded at start: nothing main.ts or worker.ts loads reaches the SDK or its modules", () => {
    for (const entry of ["main.ts", "worker.ts"]) {
      const { files, packages } = staticallyLoaded(path.join(SRC, entry))
      expect(files.length).toBeGreaterThan(30)
      expect(files.filter(sdkSide)).toEqual([])
      expect(packages.filter((name) => OTEL.test(name))).toEqual([])
    }
    expect(staticallyLoaded(path.join(SRC, "main.ts")).files).toContain(path.join("layers", "Telemetry.ts"))
  })

  it("is loaded on demand by the telemetry layer, which does reach it", () => {
    expect(readFileSync(path.join(SRC, "layers", "Telemetry.ts"), "utf8")).toMatch(/import\("\.\/TelemetrySdk\.js"\)/)
    const { files, packages } = staticallyLoaded(path.join(SRC, "layers", "TelemetrySdk.ts"))
    expect(files).toContain(path.join("services", "telemetry", "otlpTraces.ts"))
    expect(packages).toContain("@opentelemetry/sdk-metrics")
    expect(packages).toContain("@effect/opentelemetry/Resource")
  })

  const modulesOfARun = async (telemetry: string) => {
    const backend = await startBackend("lobby")
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 1\n${telemetry}`, {
      "lobby.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const file = path.join(dir.root, "modules.json")
    const portal = startPortal(["--config", dir.configFile], {
      env: { NODE_OPTIONS: `--import=${PRELOAD}`, PORTAL_LOADED_MODULES_FILE: file }
    })
    const [, port] = await portal.waitForOutput(/listening on 127\.0\.0\.1:(\d+)/)
    await ping(Number(port), "mc.example.com")
    expect((await join(Number(port), "mc.example.com", { username: "alice" }))._tag).toBe("Kicked")
    expect(await portal.stop("SIGTERM")).toBe(0)
    const modules: Array<string> = JSON.parse(readFileSync(file, "utf8"))
    expect(modules.some((url) => url.endsWith(path.join("dist", "main.js")))).toBe(true)
    return modules
  }

  it("is not in the process of a Portal without [telemetry] that served a ping and a login", async () => {
    const modules = await modulesOfARun("")
    expect(modules.filter((url) => OTEL.test(url) || TELEMETRY_CHUNK.test(url))).toEqual([])
  }, 30_000)

  it("is in the process once [telemetry] is enabled", async () => {
    const modules = await modulesOfARun(`[telemetry]\nenabled = true\n`)
    expect(modules.some((url) => url.includes("@opentelemetry/sdk-metrics"))).toBe(true)
    expect(modules.some((url) => url.includes("@opentelemetry/exporter-metrics-otlp"))).toBe(true)
    expect(modules.some((url) => TELEMETRY_CHUNK.test(url))).toBe(true)
  }, 30_000)
})
