/** A backend's status JSON decoded with Schema: objects pass with every field kept; anything else names its fault. */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { oneLine } from "../../src/services/parseIssue.js"
import { decodeStatusJson } from "../../src/services/status/statusJson.js"

const reasonOf = (text: string) => Either.match(decodeStatusJson(text), { onLeft: (reason) => reason, onRight: () => "decoded" })

describe("decodeStatusJson", () => {
  it("keeps every field it does not check, at any depth", () => {
    const answer = {
      version: { name: "1.20.4", protocol: 765, flag: 1 },
      players: { max: 1, online: 0, sample: [{ name: "a", id: "b", extra: true }], other: "x" },
      description: [{ text: "a" }, { text: "b", color: "red" }],
      favicon: "data:image/png;base64,AAAA",
      modinfo: { type: "FML", modList: [] },
      preventsChatReports: true
    }
    expect(decodeStatusJson(JSON.stringify(answer))).toEqual(Either.right(answer))
    expect(decodeStatusJson("{}")).toEqual(Either.right({}))
  })

  it("refuses what is not JSON, not an object, or has a field Portal reads of the wrong type", () => {
    expect(reasonOf("null")).toBe("not a status answer: expected a JSON object, got null")
    expect(reasonOf("[]")).toBe("not a status answer: expected a JSON object, got []")
    expect(reasonOf("true")).toBe("not a status answer: expected a JSON object, got true")
    expect(reasonOf("{")).toMatch(/^not JSON \(.+\)$/)
    expect(reasonOf("")).toMatch(/^not JSON \(.+\)$/)
    expect(reasonOf(`{"favicon":null}`)).toBe("not a status answer: favicon: expected string, got null")
    expect(reasonOf(`{"version":{"name":"x"}}`)).toBe("not a status answer: version.protocol: is missing")
    expect(reasonOf(`{"players":{"max":1,"online":0,"sample":[{"name":1,"id":"x"}]}}`)).toBe(
      "not a status answer: players.sample.0.name: expected string, got 1"
    )
  })

  it("refuses nesting deeper than a status answer has (it would overflow the stack when written out again)", () => {
    const nested = (depth: number) => `{"description":${"[".repeat(depth - 1)}${"]".repeat(depth - 1)}}`
    expect(reasonOf(nested(128))).toBe("decoded")
    expect(reasonOf(nested(129))).toBe("not a status answer: nested deeper than 128 levels")
    // Brackets inside strings (escaped quotes too) do not count.
    expect(reasonOf(JSON.stringify({ description: "[".repeat(1000) + '\\"' + "{".repeat(1000) }))).toBe("decoded")
  })

  it("a reason is one bounded line whatever the backend sent", () => {
    const reason = reasonOf(JSON.stringify({ version: `line one\nline two\r\u0000${"x".repeat(5000)}` }))
    expect(reason).not.toMatch(/[\u0000-\u001f]/)
    expect(reason.length).toBeLessThanOrEqual(203)
    expect(oneLine("a\n\nb")).toBe("a b")
  })
})
