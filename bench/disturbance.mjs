// @ts-check
/**
 * Windows the machine did not give to the bench. On a virtual machine the hypervisor sometimes takes a share of the
 * CPUs (steal), and other processes may wake up; either stretches latency tails and cuts throughput for whichever
 * target happens to be measured then. Such a window is measured again, a bounded number of times, and the least
 * disturbed of its attempts is kept. The rule looks only at the disturbance, never at the result, and is the same
 * for every target.
 */

/** A window where the hypervisor or other processes took more than this share of one core (%) is measured again. */
export const DISTURBED_PERCENT = 5
/** At most this many more attempts per window; then the least disturbed attempt stands, and the report says so. */
export const MAX_REPEATS = 2

/** @param {Record<string, unknown> | undefined} sample */
export const disturbanceOf = (sample) => {
  const steal = typeof sample?.stealPercent === "number" ? Math.max(0, sample.stealPercent) : 0
  const other = typeof sample?.otherPercent === "number" ? Math.max(0, sample.otherPercent) : 0
  return steal + other
}

/** @param {Record<string, unknown> | undefined} sample */
export const isDisturbed = (sample) => disturbanceOf(sample) > DISTURBED_PERCENT

/**
 * Measures a window, and again while it was disturbed (up to `maxRepeats` more times).
 * @template {Record<string, unknown>} S
 * @param {() => Promise<S>} measure
 * @param {number} [maxRepeats]
 * @returns {Promise<{ sample: S, attempts: Array<number> }>} the least disturbed attempt, and every attempt's disturbance
 */
export const measureUndisturbed = async (measure, maxRepeats = MAX_REPEATS) => {
  let best = await measure()
  const attempts = [disturbanceOf(best)]
  while (isDisturbed(best) && attempts.length <= maxRepeats) {
    const again = await measure()
    attempts.push(disturbanceOf(again))
    if (disturbanceOf(again) < disturbanceOf(best)) best = again
  }
  return { sample: best, attempts }
}

/**
 * The report's line about repeated windows, or nothing when none was.
 * @param {Array<{ scenario: string, target: string, round: number, attempts: Array<number> }>} repeats
 */
export const repeatNote = (repeats) => {
  if (repeats.length === 0) return []
  const percent = (/** @type {number} */ value) => `${value.toFixed(0)}%`
  const listed = repeats
    .map(({ scenario, target, round, attempts }) => `${scenario} ${target} round ${round + 1} (${attempts.map(percent).join(", ")})`)
    .join("; ")
  const stillDisturbed = repeats.filter(({ attempts }) => Math.min(...attempts) > DISTURBED_PERCENT).length
  return [
    `- Windows measured again because the hypervisor and other processes took more than ${DISTURBED_PERCENT}% of a core ` +
      `(up to ${MAX_REPEATS} more attempts, the least disturbed kept; disturbance of each attempt): ${listed}.` +
      (stillDisturbed > 0 ? ` ${stillDisturbed} of them stayed disturbed in every attempt.` : "")
  ]
}
