/**
 * Export failures, logged at most once a minute: a collector that is down fails every batch of spans and every metric
 * push, and one line a minute says so (with how many failed since the last line) without flooding the log.
 */
import * as Effect from "effect/Effect"

export const FAILURE_LOG_INTERVAL_MS = 60_000

export interface ExportFailures {
  /** One export of `what` (traces, metrics) failed with `reason`. */
  readonly failed: (what: string, reason: string) => void
}

export const makeExportFailures = (
  endpoint: string,
  log: (effect: Effect.Effect<void>) => void,
  /** Milliseconds (Effect's clock, as the caller has it). */
  now: () => number
): ExportFailures => {
  let lastLogged = Number.NEGATIVE_INFINITY
  let unlogged = 0
  return {
    failed: (what, reason) => {
      const at = now()
      if (at - lastLogged < FAILURE_LOG_INTERVAL_MS) {
        unlogged += 1
        return
      }
      const since = unlogged === 0 ? "" : ` (${unlogged} more failed export(s) since the last report)`
      lastLogged = at
      unlogged = 0
      log(Effect.logWarning(`telemetry: exporting ${what} to ${endpoint} failed: ${reason}${since}; export failures are reported at most once a minute`))
    }
  }
}
