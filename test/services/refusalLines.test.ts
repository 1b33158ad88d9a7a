/** The lines of refused logins: a burst per reason at their own level, the rest at debug, and one summary per window. */
import { Effect, Logger, LogLevel } from "effect"
import { describe, expect, it } from "vitest"
import { BURST, makeRefusalLines, WINDOW_MS } from "../../src/services/log/refusalLines.js"

const setup = () => {
  let now = 0
  const lines: Array<string> = []
  const timers: Array<{ at: number; run: () => void }> = []
  const logger = Logger.make(({ logLevel, message }) => lines.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`))
  const run = (effect: Effect.Effect<void>) =>
    Effect.runSync(effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)), Logger.withMinimumLogLevel(LogLevel.Debug)))
  const refusals = makeRefusalLines({ now: () => now, schedule: (fn, delayMs) => void timers.push({ at: now + delayMs, run: fn }), logDetached: run })
  const say = (reason: string, level: "info" | "warning" = "info") => run(refusals.say(reason, level, `refused for ${reason}`))
  const advance = (ms: number) => {
    now += ms
    for (const timer of timers.filter((t) => t.at <= now)) {
      timers.splice(timers.indexOf(timer), 1)
      timer.run()
    }
  }
  return { lines, say, advance, timers }
}

describe("refusal lines", () => {
  it("a flood of one reason is a burst of lines at their level, debug lines, and one summary when the window ends", () => {
    const { lines, say, advance } = setup()
    for (let i = 0; i < 500; i++) say("rate_limited")
    expect(lines.filter((line) => line === "INFO refused for rate_limited")).toHaveLength(BURST)
    expect(lines.filter((line) => line === "DEBUG refused for rate_limited")).toHaveLength(500 - BURST)
    advance(WINDOW_MS)
    expect(lines.at(-1)).toBe(`INFO ${500 - BURST} more logins refused (rate_limited) in the last 10s, logged at debug level`)
    // The next window starts afresh.
    say("rate_limited")
    expect(lines.at(-1)).toBe("INFO refused for rate_limited")
  })

  it("counts each reason apart, keeps warnings as warnings, and says nothing more when nothing was held back", () => {
    const { lines, say, advance, timers } = setup()
    for (let i = 0; i < BURST; i++) say("bad_packet", "warning")
    say("banned")
    expect(lines).toEqual([...Array.from({ length: BURST }, () => "WARN refused for bad_packet"), "INFO refused for banned"])
    expect(timers).toHaveLength(0)
    advance(WINDOW_MS)
    say("bad_packet", "warning")
    expect(lines.at(-1)).toBe("WARN refused for bad_packet")
  })
})
