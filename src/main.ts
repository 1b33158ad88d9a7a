#!/usr/bin/env -S node --single-threaded-gc --no-allocation-site-pretenuring --max-semi-space-size=2 --heap-growing-percent=30
/**
 * Portal's command line: `node dist/main.js [--config PATH] [--check] [--dev] [--log-format pretty|json]
 * [--log-level LEVEL] [--help] [--version]`.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { parseArgs } from "node:util"
import { runCheck } from "./layers/Check.js"
import { LOG_LEVELS, type LogFormat, type LogLevelName, loggingLayer } from "./layers/Logging.js"
import { MainLayer } from "./layers/Main.js"
import { shrinkHeap } from "./services/runtime/shrinkHeap.js"
import { sessionServerProblem } from "./services/session/authentication.js"
import { PORTAL_VERSION } from "./schema/GlobalConfig.js"
import { formatProblem } from "./schema/problems.js"

const USAGE = `Portal ${PORTAL_VERSION}: a reverse proxy for Minecraft Java Edition

Usage: portal [options]

Options:
  -c, --config PATH        global configuration file (default: ./proxy.toml)
      --check              validate proxy.toml and every server file, print problems, exit 0 (valid) or 1
      --dev                development mode: embedded demo backends in place of real servers
      --log-format FORMAT  pretty (default) or json
      --log-level LEVEL    ${LOG_LEVELS.join(", ")} (default: info)
  -h, --help               show this text
  -v, --version            print the version
`

const fail = (message: string): never => {
  process.stderr.write(`portal: ${message}\n\n${USAGE}`)
  process.exit(2)
}

let args: ReturnType<typeof parse>
const parse = () =>
  parseArgs({
    options: {
      config: { type: "string", short: "c", default: "proxy.toml" },
      check: { type: "boolean", default: false },
      dev: { type: "boolean", default: false },
      "log-format": { type: "string", default: "pretty" },
      "log-level": { type: "string", default: "info" },
      help: { type: "boolean", short: "h", default: false },
      version: { type: "boolean", short: "v", default: false }
    },
    strict: true,
    allowPositionals: false
  }).values
try {
  args = parse()
} catch (error) {
  fail(error instanceof Error ? error.message : String(error))
}
if (args!.help) {
  process.stdout.write(USAGE)
  process.exit(0)
}
if (args!.version) {
  process.stdout.write(`${PORTAL_VERSION}\n`)
  process.exit(0)
}
const LOG_FORMATS: ReadonlyArray<LogFormat> = ["pretty", "json"]
const logFormat = LOG_FORMATS.find((format) => format === args!["log-format"]) ??
  fail(`--log-format must be pretty or json, got ${args!["log-format"]}`)
const logLevel: LogLevelName = LOG_LEVELS.find((level) => level === args!["log-level"]) ??
  fail(`--log-level must be one of ${LOG_LEVELS.join(", ")}, got ${args!["log-level"]}`)
const configFile = args!.config!
const logging = loggingLayer(logFormat, logLevel)

// Every client_only login would fail with a bad session service URL: refused before anything starts, as a bad file is.
const sessionServer = process.env.PORTAL_SESSION_SERVER
const sessionServerIssue = sessionServer === undefined ? undefined : sessionServerProblem(sessionServer)
if (sessionServerIssue !== undefined) {
  process.stderr.write(`portal: PORTAL_SESSION_SERVER=${JSON.stringify(sessionServer)}: ${sessionServerIssue}\n`)
  process.exit(1)
}

if (args!.check) {
  NodeRuntime.runMain(runCheck(configFile).pipe(Effect.provide(logging)), {
    disablePrettyLogger: true,
    teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) ? Number(exit.value) : 1)
  })
} else {
  // Once everything is built and listening, the heap that startup grew is given back (services/runtime/shrinkHeap.ts).
  const started = Layer.effectDiscard(Effect.forkDaemon(shrinkHeap))
  const program = Layer.launch(
    started.pipe(
      Layer.provideMerge(MainLayer({ configFile, dev: args!.dev!, log: { format: logFormat, level: logLevel, colors: process.stdout.isTTY === true } }))
    )
  ).pipe(
    Effect.as(0),
    Effect.catchTag("ConfigError", (error) =>
      logFormat === "json"
        ? // JSON logs stay JSON to the last line: a log pipeline reads every problem as a record.
          Effect.gen(function* () {
            for (const problem of error.problems) yield* Effect.logError(formatProblem(problem))
            for (const note of error.notes ?? []) yield* Effect.logWarning(`note: ${note}`)
            yield* Effect.logFatal(`the configuration has ${error.problems.length} problem(s); not starting`)
            return 1
          })
        : Effect.sync(() => {
            for (const problem of error.problems) process.stderr.write(`${formatProblem(problem)}\n`)
            for (const note of error.notes ?? []) process.stderr.write(`note: ${note}\n`)
            process.stderr.write(`portal: the configuration has ${error.problems.length} problem(s); not starting\n`)
            return 1
          })
    ),
    Effect.catchAll((error) =>
      Effect.as(Effect.logFatal(`Portal cannot run: ${error instanceof Error ? error.message : String(error)}`), 1)
    ),
    Effect.tapDefect((cause) => Effect.logFatal("Portal stopped on an unexpected error", cause)),
    Effect.provide(logging)
  )
  NodeRuntime.runMain(program, {
    disablePrettyLogger: true,
    teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) ? Number(exit.value) : Exit.isInterrupted(exit) ? 0 : 1)
  })
  // The first SIGINT or SIGTERM starts the graceful shutdown (runMain's own handler); a second one, while it waits for
  // the players, stops at once, as the usual second Ctrl-C does, and says so (Node's default ended it silently).
  let signals = 0
  for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    process.on(signal, () => {
      signals += 1
      if (signals < 2) return
      process.stderr.write(`portal: ${signal} again during the shutdown: stopping now, without waiting for the players\n`)
      process.exit(code)
    })
  }
}
