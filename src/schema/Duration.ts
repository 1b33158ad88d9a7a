/**
 * Durations as written in Portal's TOML files: one or more `<number><unit>` groups,
 * units `ms`, `s`, `m`, `h`, `d` (`500ms`, `5s`, `1h30m`, `7d`).
 */
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

const UNIT_MILLIS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const GROUP = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y

/** Parses `1h30m` style text to milliseconds; `None` when the text is not a duration. */
export const parseDurationMillis = (text: string): Option.Option<number> => {
  const input = text.trim()
  if (input.length === 0) return Option.none()
  let total = 0
  GROUP.lastIndex = 0
  while (GROUP.lastIndex < input.length) {
    const match = GROUP.exec(input)
    if (match === null) return Option.none()
    total += Number(match[1]) * UNIT_MILLIS[match[2]!]!
  }
  return Number.isFinite(total) ? Option.some(total) : Option.none()
}

/** Formats milliseconds back into the shortest `1h30m` style text. */
export const formatDurationMillis = (millis: number): string => {
  if (millis === 0) return "0s"
  let rest = Math.round(millis)
  let out = ""
  for (const [unit, size] of [["d", 86_400_000], ["h", 3_600_000], ["m", 60_000], ["s", 1_000], ["ms", 1]] as const) {
    if (rest >= size) {
      const count = Math.floor(rest / size)
      out += `${count}${unit}`
      rest -= count * size
    }
  }
  return out
}

const expectedDuration = (actual: unknown) =>
  `expected a duration such as "500ms", "5s", "1h30m" or "7d", got ${JSON.stringify(actual) ?? String(actual)}`

// A bare number (`timeout = 5`) is the usual mistake: it gets the same words as a malformed text.
const DurationText = Schema.String.annotations({ message: (issue) => ({ message: expectedDuration(issue.actual), override: true }) })

export const DurationString = Schema.transformOrFail(DurationText, Schema.DurationFromSelf, {
  strict: true,
  decode: (text, _, ast) =>
    Option.match(parseDurationMillis(text), {
      onNone: () => ParseResult.fail(new ParseResult.Type(ast, text, expectedDuration(text))),
      onSome: (millis) => ParseResult.succeed(Duration.millis(millis))
    }),
  encode: (duration) => ParseResult.succeed(formatDurationMillis(Duration.toMillis(duration)))
}).annotations({ identifier: "Duration" })

/** A duration that must be above zero: a zero interval would spin, a zero timeout would refuse everything. */
export const PositiveDuration = DurationString.pipe(
  Schema.filter((duration) => Duration.toMillis(duration) > 0 || "expected a duration above zero")
)

/** The longest wait Portal accepts for a timer: Node's timers hold at most 2^31-1 ms (about 24.8 days). */
export const MAX_TIMER_MILLIS = 24 * 86_400_000

/** A duration a timer waits for: above zero and at most 24 days (a longer one would overflow Node's timer and fire at once). */
export const TimerDuration = PositiveDuration.pipe(
  Schema.filter((duration) => Duration.toMillis(duration) <= MAX_TIMER_MILLIS || "expected a duration of at most 24d")
).annotations({ identifier: "Duration" })
