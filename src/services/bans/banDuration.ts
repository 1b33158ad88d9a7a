/** How long a ban may be given for (pure): the same rule for the admin API and the store. */
import * as Duration from "effect/Duration"

/** 100 years: longer is what a permanent ban (no duration) is for, and its end must stay a date JavaScript can hold. */
export const MAX_BAN_MILLIS = 36_500 * 86_400_000

/** Why a ban cannot last `duration`, or `undefined` when it can. An infinite duration is a permanent ban. */
export const banDurationProblem = (duration: Duration.Duration): string | undefined => {
  if (!Duration.isFinite(duration)) return undefined
  const millis = Duration.toMillis(duration)
  if (millis <= 0) return `a ban must last longer than 0 seconds, got ${Duration.format(duration)}`
  if (millis > MAX_BAN_MILLIS) return "a ban can last at most 36500d (100 years); give no duration for a permanent ban"
  return undefined
}
