/** Export failures are logged at most once a minute, the next line saying how many failed in between. */
import { Effect, Logger } from "effect"
import { describe, expect, it } from "vitest"
import { makeExportFailures } from "../../../src/services/telemetry/exportFailures.js"

/** ExportFailures on a clock the test moves, keeping the messages of the lines it logs. */
const setup = () => {
  const clock = { now: 1_000_000 }
  const messages: Array<string> = []
  const keep = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message }) => messages.push(Array.isArray(message) ? message.join(" ") : String(message)))
  )
  const failures = makeExportFailures("http://collector:4317", (effect) => Effect.runSync(Effect.provide(effect, keep)), () => clock.now)
  return { clock, messages, failures }
}

describe("export failures", () => {
  it("are logged once a minute at most, the next line counting those in between", () => {
    const { clock, messages, failures } = setup()
    failures.failed("traces", "14 UNAVAILABLE: No connection established")
    for (let second = 1; second < 60; second++) {
      clock.now += 1000
      failures.failed("metrics", "14 UNAVAILABLE")
    }
    expect(messages).toEqual([
      "telemetry: exporting traces to http://collector:4317 failed: 14 UNAVAILABLE: No connection established; export failures are reported at most once a minute"
    ])
    clock.now += 1000
    failures.failed("metrics", "timeout")
    expect(messages).toHaveLength(2)
    expect(messages[1]).toBe(
      "telemetry: exporting metrics to http://collector:4317 failed: timeout (59 more failed export(s) since the last report); export failures are reported at most once a minute"
    )
  })
})
