/**
 * Keeping up with files edited while Portal runs: a watch on a directory (node:fs `watch`), events debounced, and a
 * poll at a slow interval as the safety net for watches that miss events (network file systems) or stop. A watch
 * that fails is armed again at the next poll; that it cannot run is logged once until it runs again. The debounce and
 * the poll wait on Effect's Clock (a TestClock drives them), or on a clock the caller gives; everything stops with
 * the scope.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"

export interface WatchOptions {
  readonly dir: string
  /** Only events about this entry of `dir` (an event without a name counts: some platforms leave it out). */
  readonly fileName?: string
  /** What the log lines call the watched thing: `changes in servers`, `changes to bans.json`. */
  readonly subject: string
  /** Editors write in several steps: `onChange` runs once events have stopped for this long. */
  readonly debounce: Duration.DurationInput
  readonly pollInterval: Duration.DurationInput
  /**
   * What the poll compares (a stat of the file, say); `onChange` runs when it differs from the poll before.
   * Without it, every poll runs `onChange`.
   */
  readonly fingerprint?: Effect.Effect<string>
  /** Brings things in line with the files; runs one at a time. */
  readonly onChange: Effect.Effect<void>
  /**
   * The clock the debounce and the poll wait on; by default the one in the environment (a TestClock in tests).
   * `onChange` always runs on the environment's clock.
   */
  readonly clock?: Clock.Clock
}

/**
 * Watches `dir` until the scope closes. The watch is registered before this returns, so no change made after the
 * caller's first read can slip between reading and watching.
 */
export const watchFiles = (options: WatchOptions): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { dir, fileName, subject } = options
    const onWatchClock = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      options.clock === undefined ? effect : Effect.withClock(effect, options.clock)
    // Node calls the watch outside any fiber: it only drops a token here, which the debounce fiber takes.
    const events = yield* Queue.sliding<void>(1)
    const failures = yield* Queue.sliding<string>(1)
    let watcher: NodeFs.FSWatcher | undefined
    let warned = false
    const warnOnce = (message: string) =>
      Effect.suspend(() => {
        if (warned) return Effect.void
        warned = true
        return Effect.logWarning(message)
      })

    const arm = Effect.suspend(() => {
      if (watcher !== undefined) return Effect.void
      try {
        const started = NodeFs.watch(dir, { persistent: false }, (_event, name) => {
          if (fileName === undefined || name === null || name === fileName) Queue.unsafeOffer(events, undefined)
        })
        started.on("error", (error) => {
          started.close()
          if (watcher === started) watcher = undefined
          Queue.unsafeOffer(failures, error.message)
        })
        watcher = started
        warned = false
        return Effect.void
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error)
        return warnOnce(`cannot watch ${dir} (${reason}); ${subject} are picked up by polling`)
      }
    })
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        watcher?.close()
        watcher = undefined
      })
    )
    yield* arm

    const lock = yield* Effect.makeSemaphore(1)
    const run = lock.withPermits(1)(
      options.onChange.pipe(Effect.catchAllCause((cause) => Effect.logError(`reacting to ${subject} failed`, cause)))
    )

    // Trailing debounce: after an event, wait until none has come for `debounce`, then run once.
    const debounced = Effect.gen(function* () {
      yield* Queue.take(events)
      while (Option.isSome(yield* onWatchClock(Effect.timeoutOption(Queue.take(events), options.debounce)))) {
        // another event within the quiet time: wait again
      }
      yield* run
    })
    yield* Effect.forkScoped(Effect.forever(debounced))
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.flatMap(Queue.take(failures), (reason) =>
          warnOnce(`watching ${dir} stopped (${reason}); ${subject} are picked up by polling`)
        )
      )
    )

    let lastSeen: string | undefined
    const poll = Effect.gen(function* () {
      yield* arm
      if (options.fingerprint !== undefined) {
        const seen = yield* options.fingerprint
        if (seen === lastSeen) return
        lastSeen = seen
      }
      yield* run
    })
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(onWatchClock(Effect.sleep(options.pollInterval)), poll)))
  })

/** Size, modification time and inode of a file (`missing` when absent): a cheap way for the poll to see a change. */
/** Size, modification time and inode: what changes when a file is written or replaced. */
export const fingerprintOf = (info: FileSystem.File.Info): string => {
  const mtime = Option.getOrUndefined(Option.map(info.mtime, (date) => date.getTime()))
  return `${info.size}:${mtime}:${Option.getOrUndefined(info.ino)}`
}

export const statFingerprint = (fs: FileSystem.FileSystem, file: string): Effect.Effect<string> =>
  fs.stat(file).pipe(
    Effect.map(fingerprintOf),
    Effect.catchAll((error) =>
      Effect.succeed(error._tag === "SystemError" && error.reason === "NotFound" ? "missing" : `error ${error.message}`)
    )
  )
