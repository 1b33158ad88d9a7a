/**
 * Provider `local`: runs the server as a child process of Portal (no shell), logs its output line by line,
 * and reports it ready when a stdout line contains `ready_pattern`. A stop writes `stop` to its stdin and
 * kills it after `shutdown_timeout`. Every process is stopped the same way when its scope closes.
 */
import * as Command from "@effect/platform/Command"
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import type * as PlatformError from "@effect/platform/Error"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { ServerManagerConfig } from "../../schema/ServerConfig.js"
import { LineSplitter } from "./lines.js"
import { type Provider, ProviderError, type ProviderInput } from "./Provider.js"

export type LocalConfig = Extract<ServerManagerConfig, { readonly type: "local" }>

/** How long a killed process may take to be reaped, and how long its last output may take to be logged. */
const KILL_WAIT = Duration.seconds(5)
const DRAIN_WAIT = Duration.seconds(1)
const STOP_COMMAND = new TextEncoder().encode("stop\n")

/**
 * Waits for `effect` at most `duration`. Made interruptible so that the bound holds inside finalizers too
 * (a timeout cannot interrupt an uninterruptible wait, and finalizers run uninterruptibly).
 */
const within = <A, E>(effect: Effect.Effect<A, E>, duration: Duration.DurationInput) =>
  Effect.timeout(Effect.interruptible(effect), duration)

interface RunningProcess {
  readonly process: CommandExecutor.Process
  readonly stdin: Queue.Queue<Uint8Array>
  readonly scope: Scope.CloseableScope
  /** Completed (with how it ended) once the exit has been handled. */
  readonly exited: Deferred.Deferred<string>
  /** Portal asked it to stop (its exit is not a crash). */
  requested: boolean
  /** Killed after a start timeout: its ready line no longer counts. */
  aborted: boolean
  ready: boolean
  /** The fiber logging stdout and stderr (ends when both pipes close). */
  output: Fiber.Fiber<void> | undefined
}

const describeExit = (result: Either.Either<CommandExecutor.ExitCode, PlatformError.PlatformError>): string => {
  if (Either.isRight(result)) return `exited with code ${result.right}`
  const signal = /signal: (\w+)/.exec(result.left.message)?.[1]
  return signal !== undefined ? `was killed by ${signal}` : `ended: ${result.left.message}`
}

const describeSpawnError = (config: LocalConfig, error: PlatformError.PlatformError): string => {
  if (error._tag === "SystemError") {
    if (error.module === "FileSystem") {
      return `working_dir "${config.working_dir}" cannot be used (${error.reason}${error.description !== undefined ? `: ${error.description}` : ""})`
    }
    if (error.method === "spawn" && error.reason === "NotFound") {
      return `command "${config.command}" was not found (spawn ENOENT); check server_manager.command`
    }
    if (error.method === "spawn" && error.reason === "PermissionDenied") {
      return `command "${config.command}" is not executable (spawn EACCES)`
    }
  }
  return `cannot start "${config.command}": ${error.message}`
}

export const makeLocal = (
  input: ProviderInput,
  config: LocalConfig
): Effect.Effect<Provider, never, Scope.Scope | CommandExecutor.CommandExecutor> =>
  Effect.gen(function* () {
    const executor = yield* CommandExecutor.CommandExecutor
    const providerScope = yield* Effect.scope
    const shutdownTimeout = config.shutdown_timeout
    let current: RunningProcess | undefined
    const annotate = Effect.annotateLogs("server", input.serverId)

    /** Logs every line of one output stream; stdout lines are also checked for the ready pattern. */
    const pump = (
      running: RunningProcess,
      stream: Stream.Stream<Uint8Array, PlatformError.PlatformError>,
      source: "stdout" | "stderr"
    ) =>
      Effect.suspend(() => {
        const splitter = new LineSplitter()
        const onLine = (line: string) =>
          Effect.gen(function* () {
            if (source === "stdout") yield* Effect.logInfo(line).pipe(Effect.annotateLogs("stream", source))
            else yield* Effect.logWarning(line).pipe(Effect.annotateLogs("stream", source))
            if (source === "stdout" && !running.ready && !running.aborted && line.includes(config.ready_pattern)) {
              running.ready = true
              yield* input.report({ _tag: "Running", detail: "the ready line was printed" })
            }
          })
        return stream.pipe(
          Stream.decodeText(),
          Stream.mapConcat((text) => splitter.push(text)),
          Stream.concat(Stream.suspend(() => Stream.fromIterable(splitter.end()))),
          Stream.runForEach(onLine),
          Effect.ignore
        )
      })

    /** Waits for the exit, then reports it: a stop Portal asked for, or a crash. */
    const watchExit = (running: RunningProcess, output: Fiber.Fiber<void, never>) =>
      Effect.gen(function* () {
        const result = yield* Effect.either(running.process.exitCode)
        const detail = yield* Effect.uninterruptible(
          Effect.gen(function* () {
            yield* within(Fiber.await(output), DRAIN_WAIT).pipe(Effect.ignore)
            if (current === running) current = undefined
            yield* Scope.close(running.scope, Exit.void)
            const detail = describeExit(result)
            yield* Deferred.succeed(running.exited, detail)
            return detail
          })
        )
        if (running.requested) {
          yield* Effect.logInfo(`server process ${detail}`)
          yield* input.report({ _tag: "Stopped", requested: true, detail: `process ${detail}` })
        } else {
          yield* Effect.logWarning(`server process ${detail} without being asked to stop`)
          yield* input.report({ _tag: "Crashed", detail: `process ${detail} unexpectedly`, polled: false })
        }
      })

    const spawn = Effect.uninterruptible(
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const stdin = yield* Queue.unbounded<Uint8Array>()
        const command = Command.make(config.command, ...config.args).pipe(
          Command.workingDirectory(config.working_dir),
          Command.stdin(Stream.fromQueue(stdin))
        )
        const spawned = yield* Command.start(command).pipe(
          Effect.provideService(CommandExecutor.CommandExecutor, executor),
          Scope.extend(scope),
          Effect.either
        )
        if (Either.isLeft(spawned)) {
          yield* Queue.shutdown(stdin)
          yield* Scope.close(scope, Exit.void)
          const message = describeSpawnError(config, spawned.left)
          yield* Effect.logError(`cannot start the server: ${message}`)
          return yield* Effect.fail(new ProviderError({ reason: "spawn", message }))
        }
        // Finalizers run in reverse: the stdin feeder ends before the process is released.
        yield* Scope.addFinalizer(scope, Queue.shutdown(stdin))
        const running: RunningProcess = {
          process: spawned.right,
          stdin,
          scope,
          exited: yield* Deferred.make<string>(),
          requested: false,
          aborted: false,
          ready: false,
          output: undefined
        }
        current = running
        yield* Effect.logInfo(
          `started ${[config.command, ...config.args].join(" ")} in ${config.working_dir} (pid ${running.process.pid}); ` +
            `waiting for a line containing ${JSON.stringify(config.ready_pattern)}`
        )
        const output = yield* Effect.all([pump(running, running.process.stdout, "stdout"), pump(running, running.process.stderr, "stderr")], {
          concurrency: 2,
          discard: true
        }).pipe(Effect.interruptible, Effect.forkIn(scope))
        running.output = output
        // Fibers forked here would inherit this region's uninterruptibility: they must be interruptible.
        yield* watchExit(running, output).pipe(Effect.interruptible, Effect.forkIn(providerScope))
      })
    )

    const start = Effect.suspend(() => {
      const previous = current
      if (previous === undefined) return spawn
      if (!previous.requested && !previous.aborted) return Effect.void // already running
      // A process on its way out (stopped or killed) must be gone before the next one binds the same port.
      return within(Deferred.await(previous.exited), Duration.sum(shutdownTimeout, KILL_WAIT)).pipe(
        Effect.ignore,
        Effect.zipRight(Effect.suspend(() => (current === undefined ? spawn : Effect.void)))
      )
    })

    /** Sends `stop`, waits up to `shutdown_timeout`, then kills the process group. Returns when it has exited. */
    const stopProcess = (running: RunningProcess, why?: string) =>
      Effect.gen(function* () {
        running.requested = true
        if (!(yield* running.process.isRunning.pipe(Effect.orElseSucceed(() => false)))) return
        yield* Effect.logInfo(
          `stopping the server process${why !== undefined ? ` (${why})` : ""}: sent "stop", waiting up to ${Duration.format(shutdownTimeout)} before killing it`
        )
        if (!(yield* Queue.isShutdown(running.stdin))) yield* Queue.offer(running.stdin, STOP_COMMAND)
        const exited = yield* within(Effect.either(running.process.exitCode), shutdownTimeout).pipe(Effect.option)
        if (exited._tag === "Some") return
        yield* Effect.logWarning(`server process did not exit within ${Duration.format(shutdownTimeout)} after "stop"; killing it`)
        yield* within(running.process.kill("SIGKILL"), KILL_WAIT).pipe(Effect.ignore)
      })

    // When the scope closes (server removed, or Portal shutting down) the process is stopped gracefully.
    yield* Effect.addFinalizer(() =>
      annotate(Effect.suspend(() => {
        const running = current
        if (running === undefined) return Effect.void
        current = undefined
        return stopProcess(running, "Portal is shutting down or no longer manages this server").pipe(
          // The last lines the server printed while shutting down are worth keeping.
          Effect.zipRight(running.output === undefined ? Effect.void : within(Fiber.await(running.output), DRAIN_WAIT).pipe(Effect.ignore)),
          Effect.zipRight(
            within(Effect.either(running.process.exitCode), KILL_WAIT).pipe(
              Effect.flatMap((result) => Effect.logInfo(`server process ${describeExit(result)}`)),
              Effect.ignore
            )
          ),
          Effect.zipRight(Scope.close(running.scope, Exit.void))
        )
      }))
    )

    const provider: Provider = {
      initial: Effect.succeed({ _tag: "Stopped", requested: true, detail: "not started yet; starts on the first join" }),
      watch: Effect.void,
      start: annotate(start),
      stop: annotate(Effect.suspend(() => {
        const running = current
        if (running === undefined) return input.report({ _tag: "Stopped", requested: true, detail: "no process was running" })
        return stopProcess(running)
      })),
      abort: annotate(Effect.suspend(() => {
        const running = current
        if (running === undefined) return Effect.void
        running.aborted = true
        running.requested = true
        return Effect.logWarning("killing the server process: it did not become ready in time").pipe(
          Effect.zipRight(within(running.process.kill("SIGKILL"), KILL_WAIT).pipe(Effect.ignore))
        )
      }))
    }
    return provider
  })
