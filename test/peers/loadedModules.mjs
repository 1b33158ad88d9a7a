// Preloaded into a Portal process (`--import`) by test/e2e/telemetryLoading.test.ts: records every module the process
// loads (ES modules through a loader hook, CommonJS ones from the require cache) and writes the list to
// PORTAL_LOADED_MODULES_FILE when the process exits.
import { writeFileSync } from "node:fs"
import { createRequire, register } from "node:module"
import { MessageChannel } from "node:worker_threads"

const { port1, port2 } = new MessageChannel()
const loaded = new Set()
port1.on("message", (url) => loaded.add(url))
port1.unref()
register("./loadedModulesHooks.mjs", { parentURL: import.meta.url, data: { port: port2 }, transferList: [port2] })

process.on("exit", () => {
  for (const id of Object.keys(createRequire(import.meta.url).cache)) loaded.add(id)
  writeFileSync(process.env.PORTAL_LOADED_MODULES_FILE, JSON.stringify([...loaded]))
})
