/** PORTAL_SHUTDOWN_GRACE_MS: how long live sessions may go on once a shutdown begins. */
import { Duration } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { shutdownGrace } from "../../../src/services/listener/listen.js"

const saved = process.env.PORTAL_SHUTDOWN_GRACE_MS
afterEach(() => {
  if (saved === undefined) delete process.env.PORTAL_SHUTDOWN_GRACE_MS
  else process.env.PORTAL_SHUTDOWN_GRACE_MS = saved
})

const graceWith = (value: string | undefined): number => {
  if (value === undefined) delete process.env.PORTAL_SHUTDOWN_GRACE_MS
  else process.env.PORTAL_SHUTDOWN_GRACE_MS = value
  return Duration.toMillis(shutdownGrace())
}

describe("shutdownGrace", () => {
  it("is 10 s unless set, and the milliseconds given otherwise, 0 included", () => {
    expect(graceWith(undefined)).toBe(10_000)
    expect(graceWith("2500")).toBe(2500)
    expect(graceWith("0")).toBe(0)
  })

  it("takes a blank or malformed value as unset, not as 0", () => {
    expect(graceWith("")).toBe(10_000)
    expect(graceWith("  ")).toBe(10_000)
    expect(graceWith("soon")).toBe(10_000)
    expect(graceWith("-5")).toBe(10_000)
  })
})
