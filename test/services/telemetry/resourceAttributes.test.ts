/** OTEL_RESOURCE_ATTRIBUTES read as the OpenTelemetry specification says: pairs, percent-decoded, bad ones named. */
import { describe, expect, it } from "vitest"
import { parseResourceAttributes } from "../../../src/services/telemetry/resourceAttributes.js"

describe("parseResourceAttributes", () => {
  it("percent-decodes keys and values and trims them", () => {
    expect(parseResourceAttributes(" deployment.environment = pro%22d%5Cx , team=a%2Cb%3Dc,empty=")).toEqual({
      attributes: { "deployment.environment": 'pro"d\\x', team: "a,b=c", empty: "" },
      skipped: []
    })
  })

  it("leaves out and names what is not key=value or does not decode, and takes nothing from an empty text", () => {
    expect(parseResourceAttributes("good=1,novalue,=nokey,bad=%E0%A4%A,also=ok")).toEqual({
      attributes: { good: "1", also: "ok" },
      skipped: ["novalue", "=nokey", "bad=%E0%A4%A"]
    })
    expect(parseResourceAttributes("")).toEqual({ attributes: {}, skipped: [] })
  })
})
