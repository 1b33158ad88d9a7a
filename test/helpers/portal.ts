/** Portal in this process on real sockets and real files, with its log lines captured. */
import { Effect, Layer, Logger, LogLevel, ManagedRuntime } from "effect"
import { afterEach } from "vitest"
import { MainLayer } from "../../src/layers/Main.js"
import { ListeningAddress } from "../../src/services/listener/listen.js"
import { logFieldsOf } from "../../src/services/log/connectionFields.js"
import { waitFor } from "./wait.js"

export interface RunningPortal {
  readonly port: number
  readonly logs: Array<string>
  /** When each line of `logs` says it was logged (epoch ms), at the same index. */
  readonly logTimes: Array<number>
  waitForLog(pattern: RegExp, timeoutMs?: number): Promise<string>
  run<A, E>(effect: Effect.Effect<A, E, Layer.Layer.Success<ReturnType<typeof MainLayer>>>): Promise<A>
  stop(): Promise<void>
}

const running: Array<RunningPortal> = []
afterEach(async () => {
  for (const portal of running.splice(0)) await portal.stop()
})

process.env.PORTAL_SHUTDOWN_GRACE_MS ??= "300"

/** `workerLogLevel`: what worker threads log (their lines reach `logs` through the main thread); info by default. */
export const startPortal = async (configFile: string, options: { dev?: boolean; workerLogLevel?: "debug" | "info" } = {}): Promise<RunningPortal> => {
  const logs: Array<string> = []
  const logTimes: Array<number> = []
  const capture = Logger.make(({ message, logLevel, annotations, context, date }) => {
    const text = Array.isArray(message) ? message.join(" ") : String(message)
    const fields = logFieldsOf({ annotations, context }).map(([key, value]) => `${key}=${String(value)}`).join(" ")
    logs.push(`${logLevel.label} ${text}${fields.length > 0 ? ` ${fields}` : ""}`)
    logTimes.push(date.getTime())
  })
  const log = options.workerLogLevel === undefined ? {} : { log: { format: "pretty" as const, level: options.workerLogLevel, colors: false } }
  const layer = MainLayer({ configFile, dev: options.dev ?? false, ...log }).pipe(
    Layer.provide(Layer.merge(Logger.replace(Logger.defaultLogger, capture), Logger.minimumLogLevel(LogLevel.Debug)))
  )
  const runtime = ManagedRuntime.make(layer)
  const address = await runtime.runPromise(ListeningAddress)
  let stopped = false
  const portal: RunningPortal = {
    port: address.port,
    logs,
    logTimes,
    waitForLog: (pattern, timeoutMs = 5000) =>
      waitFor(() => logs.find((line) => pattern.test(line)), { timeoutMs, what: `log ${pattern}\n${logs.join("\n")}` }),
    run: (effect) => runtime.runPromise(effect),
    stop: async () => {
      if (stopped) return
      stopped = true
      await runtime.dispose()
    }
  }
  running.push(portal)
  return portal
}
