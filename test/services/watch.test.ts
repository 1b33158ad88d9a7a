/**
 * The watch helper on real directories, with the debounce and the poll driven by TestClock: node:fs events arrive
 * in real time, and each step waits (boundedly, in real time) until the helper has taken them in.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Clock, Duration, Effect, Exit, Logger, Ref, Scope, TestClock } from "effect"
import { mkdirSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { watchFiles, type WatchOptions } from "../../src/services/files/watch.js"
import { makeConfigDir } from "../helpers/tempdir.js"

const DEBOUNCE = Duration.millis(100)
const POLL = Duration.hours(1)

const realSleep = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/** Re-runs `probe` in real time until it is true, for up to two seconds. */
const eventually = (probe: Effect.Effect<boolean>, what: string) =>
  Effect.gen(function* () {
    const deadline = Date.now() + 2_000
    while (!(yield* probe)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* realSleep(10)
    }
  })

/** Whether something sleeps on the TestClock until exactly `at` (ms since the test clock's start). */
const sleepsUntil = (at: number) => Effect.map(TestClock.sleeps(), (deadlines) => Chunk.some(deadlines, (d) => d === at))

/** Starts a watch in a scope of its own, closed with the test's; returns how often `onChange` ran, and the scope. */
const startWatch = (options: Omit<WatchOptions, "onChange" | "subject" | "debounce" | "pollInterval"> & Partial<WatchOptions>) =>
  Effect.gen(function* () {
    const runs = yield* Ref.make(0)
    const scope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    yield* watchFiles({
      subject: "changes",
      debounce: DEBOUNCE,
      pollInterval: POLL,
      onChange: Ref.update(runs, (n) => n + 1),
      ...options
    }).pipe(Scope.extend(scope))
    return { runs: Ref.get(runs), scope }
  })

/** Log lines written while the returned layer is provided. */
const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    lines.push(`${logLevel.label} ${Array.isArray(message) ? message.map(String).join(" ") : String(message)}`)
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

describe("watchFiles", () => {
  it.scoped("runs onChange once events have stopped for the debounce time, on the TestClock", () =>
    Effect.gen(function* () {
      const dir = makeConfigDir().root
      const { runs, scope } = yield* startWatch({ dir })
      writeFileSync(path.join(dir, "a.toml"), "one")
      // The debounce waits on the TestClock: 100 ms from now (the clock stands at 0 until the test moves it).
      yield* eventually(sleepsUntil(100), "the event to start the debounce")
      yield* realSleep(100) // any further events of the same write land in the same quiet time
      yield* TestClock.adjust("60 millis")
      expect(yield* runs).toBe(0)

      // Another event within the quiet time starts it again.
      writeFileSync(path.join(dir, "a.toml"), "two")
      yield* eventually(sleepsUntil(160), "the second event to restart the debounce")
      yield* realSleep(100)
      yield* TestClock.adjust("60 millis")
      expect(yield* runs).toBe(0)
      yield* TestClock.adjust("40 millis")
      yield* eventually(Effect.map(runs, (n) => n === 1), "onChange after the quiet time")

      // Closing the scope ends the watch: later writes change nothing.
      yield* Scope.close(scope, Exit.void)
      writeFileSync(path.join(dir, "a.toml"), "three")
      yield* realSleep(150)
      yield* TestClock.adjust("2 hours")
      yield* realSleep(50)
      expect(yield* runs).toBe(1)
    })
  )

  it.scoped("with a file name, events about other entries of the directory are ignored", () =>
    Effect.gen(function* () {
      const dir = makeConfigDir().root
      const { runs } = yield* startWatch({ dir, fileName: "bans.json" })
      writeFileSync(path.join(dir, "other.json"), "{}")
      yield* realSleep(150)
      expect(yield* sleepsUntil(100)).toBe(false)
      writeFileSync(path.join(dir, "bans.json"), "{}")
      yield* eventually(sleepsUntil(100), "the event about the file")
      yield* TestClock.adjust(DEBOUNCE)
      yield* eventually(Effect.map(runs, (n) => n === 1), "onChange")
    })
  )

  it.scoped("the poll runs onChange at every interval, or only when the fingerprint changed", () =>
    Effect.gen(function* () {
      const dir = makeConfigDir().root
      const every = yield* startWatch({ dir, pollInterval: Duration.seconds(5) })
      const fingerprint = yield* Ref.make("a")
      const stats = yield* Ref.make(0)
      const changed = yield* startWatch({
        dir,
        pollInterval: Duration.seconds(5),
        fingerprint: Effect.zipRight(Ref.update(stats, (n) => n + 1), Ref.get(fingerprint))
      })
      /** One poll interval on, and both polls done (each sleeps again until the next one). */
      const tick = (n: number) =>
        Effect.gen(function* () {
          yield* TestClock.adjust("5 seconds")
          yield* eventually(
            Effect.map(TestClock.sleeps(), (deadlines) => Chunk.filter(deadlines, (d) => d === (n + 1) * 5_000).length === 2),
            `poll ${n}`
          )
        })
      yield* tick(1)
      // The first poll has nothing to compare with: it runs onChange.
      expect([yield* every.runs, yield* changed.runs, yield* stats]).toEqual([1, 1, 1])
      yield* tick(2)
      expect([yield* every.runs, yield* changed.runs, yield* stats]).toEqual([2, 1, 2])
      yield* Ref.set(fingerprint, "b")
      yield* tick(3)
      expect([yield* every.runs, yield* changed.runs, yield* stats]).toEqual([3, 2, 3])
      expect(yield* Clock.currentTimeMillis).toBe(15_000)
    })
  )

  it.scoped("a directory that cannot be watched is said once, polled meanwhile, and watched once it exists", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      const dir = path.join(makeConfigDir().root, "later")
      const { runs } = yield* startWatch({ dir, subject: "changes in later", pollInterval: Duration.seconds(5) })
      const warnings = () => logs.lines.filter((line) => line.startsWith("WARN"))
      expect(warnings()).toEqual([expect.stringMatching(/^WARN cannot watch .*later \(.*\); changes in later are picked up by polling$/)])
      const poll = (n: number) =>
        Effect.gen(function* () {
          yield* TestClock.adjust("5 seconds")
          yield* eventually(sleepsUntil((n + 1) * 5_000), `poll ${n}`)
        })
      yield* poll(1)
      yield* poll(2)
      expect(yield* runs).toBe(2)
      expect(warnings()).toHaveLength(1)

      // The next poll arms the watch: from then on a write is seen without waiting for a poll.
      mkdirSync(dir)
      yield* poll(3)
      expect(yield* runs).toBe(3)
      writeFileSync(path.join(dir, "a.toml"), "x")
      yield* eventually(sleepsUntil(15_000 + 100), "the event")
      yield* TestClock.adjust(DEBOUNCE)
      yield* eventually(Effect.map(runs, (n) => n === 4), "onChange after the event")
      expect(warnings()).toHaveLength(1)
    }).pipe(Effect.provide(logs.layer))
  })

  it.scoped("a custom clock moves the debounce and the poll off the TestClock", () =>
    Effect.gen(function* () {
      const dir = makeConfigDir().root
      const { runs } = yield* startWatch({ dir, pollInterval: Duration.millis(50), clock: Clock.make() })
      // Nothing waits on the TestClock, and the poll runs in real time.
      expect(yield* TestClock.sleeps()).toEqual(Chunk.empty())
      yield* eventually(Effect.map(runs, (n) => n >= 2), "two polls in real time")
    })
  )
})
