/**
 * The log lines of refused logins, bounded per reason. A refusal is an info (or warning) line while refusals are
 * few. But a login is refused after a few bytes (a handshake over `[rate_limit]`, from a banned or filtered address,
 * a garbage Login Start), so a client that repeats one hundreds of times a second would add a line per attempt and
 * bury the log. Past `BURST` lines for one reason within `WINDOW_MS` on a thread, the rest are debug lines, and one
 * line when the window ends says how many there were. The stats count every refusal all the same.
 */
import * as Effect from "effect/Effect"

/** Lines of one reason at their own level per window and thread. */
export const BURST = 10
/** The window those lines are counted in (ms). */
export const WINDOW_MS = 10_000

export interface RefusalLines {
  /**
   * The line of one refused login for `reason` (a stats reason: `rate_limited`, `banned`, ...): `message` at
   * `level` while few came lately, else at debug level, counted for the window's summary.
   */
  readonly say: (reason: string, level: "info" | "warning", message: string) => Effect.Effect<void>
}

interface Window {
  start: number
  shown: number
  /** Lines sent to debug level in this window; the summary is scheduled when the first is. */
  hidden: number
}

export const makeRefusalLines = (options: {
  /** Milliseconds on a monotonic clock. */
  readonly now: () => number
  /** Calls its function once after the delay (a timer that does not keep the process up). */
  readonly schedule: (run: () => void, delayMs: number) => void
  /** Logs from outside any connection's fiber (the summary is no connection's line). */
  readonly logDetached: (effect: Effect.Effect<void>) => void
}): RefusalLines => {
  const { now, schedule, logDetached } = options
  const windows = new Map<string, Window>()
  const summarise = (reason: string, window: Window) => () => {
    const seconds = Math.round((now() - window.start) / 1000)
    logDetached(Effect.logInfo(`${window.hidden} more logins refused (${reason}) in the last ${seconds}s, logged at debug level`))
    window.hidden = 0
  }
  return {
    say: (reason, level, message) => {
      const at = now()
      let window = windows.get(reason)
      if (window === undefined) windows.set(reason, (window = { start: at, shown: 0, hidden: 0 }))
      // A new window once the last is over and its summary said.
      else if (at - window.start >= WINDOW_MS && window.hidden === 0) {
        window.start = at
        window.shown = 0
      }
      if (window.shown < BURST) {
        window.shown += 1
        return level === "info" ? Effect.logInfo(message) : Effect.logWarning(message)
      }
      if (window.hidden++ === 0) schedule(summarise(reason, window), Math.max(0, window.start + WINDOW_MS - at))
      return Effect.logDebug(message)
    }
  }
}

/** This thread's: performance.now() and unref'd timers. */
export const threadRefusalLines = (logDetached: (effect: Effect.Effect<void>) => void): RefusalLines =>
  makeRefusalLines({ now: () => performance.now(), schedule: (run, delayMs) => setTimeout(run, delayMs).unref(), logDetached })
