// Adds bans as fast as it can through the compiled BanStore (dist/, built by `npm run build`), so that a test can
// kill it at random moments and check what is left on disk. Usage: node banWriter.mjs <ban file>.
// It loads its modules first and waits for a line on stdin before touching the file: a test can start the next
// writer while the current one runs and pay the start-up time off the clock. Prints "ready <n>" once the store is
// loaded, where n is the number of bans found; it then adds p<n>, p<n+1>, ... until killed.
// The module itself rather than the package index, which loads every platform module.
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Duration, Effect, Layer, Logger, LogLevel } from "effect"
import { BanStore } from "../../dist/services/BanStore.js"
import { ConfigStore } from "../../dist/services/ConfigStore.js"

const file = process.argv[2]
if (file === undefined) throw new Error("usage: banWriter.mjs <ban file>")

await new Promise((resolve) => process.stdin.once("data", resolve))

// Only `global.ban` is read by BanStore.
const snapshot = {
  configFile: file,
  global: { ban: { file, purge_interval: Duration.hours(1), enable_audit_log: true } },
  servers: new Map(),
  revision: 1
}

const program = Effect.gen(function* () {
  const bans = yield* BanStore
  let next = (yield* bans.list).length
  process.stdout.write(`ready ${next}\n`)
  for (;;) {
    yield* bans.add({ target: { type: "username", value: `p${next}` }, reason: `write ${next}`, source: "writer" })
    next += 1
  }
})

Effect.runFork(
  program.pipe(
    Effect.provide(BanStore.Default.pipe(Layer.provide(ConfigStore.layerStatic(snapshot)), Layer.provide(NodeFileSystem.layer))),
    Logger.withMinimumLogLevel(LogLevel.Error)
  )
)
