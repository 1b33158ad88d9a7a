/** Text components flattened for pre-1.7 clients and for logs: styles as a client renders them, arrays included. */
import { describe, expect, it } from "vitest"
import { legacyText, plainText } from "../../src/protocol/text.js"

describe("legacyText", () => {
  it("keeps plain strings and a single styled component as they are", () => {
    expect(legacyText("§aHello")).toBe("§aHello")
    expect(legacyText({ text: "Hi", color: "gold", bold: true })).toBe("§6§lHi")
    expect(legacyText({ text: "" })).toBe("")
  })

  it("gives a sibling its own style, not the one before it (a colour resets formats; no colour resets with §r)", () => {
    expect(legacyText({ text: "", extra: [{ text: "Red ", color: "red" }, { text: "plain" }] })).toBe("§cRed §rplain")
    expect(legacyText({ text: "", extra: [{ text: "Bold ", color: "red", bold: true }, { text: "green", color: "green" }] })).toBe("§c§lBold §agreen")
    expect(legacyText({ text: "", extra: [{ text: "a", color: "red" }, { text: "b", italic: true }] })).toBe("§ca§r§ob")
  })

  it("lets children inherit their parent's style, and a child turn a format off", () => {
    expect(legacyText({ text: "Welcome ", color: "gold", bold: true, extra: [{ text: "home" }, { text: " now", bold: false }] })).toBe(
      "§6§lWelcome home§6 now"
    )
  })

  it("reads an array as its first element with the others as its extras", () => {
    expect(legacyText(["", { text: "Array ", color: "green" }, "motd"])).toBe("§aArray §rmotd")
    expect(legacyText([{ text: "A ", color: "aqua" }, "inherits"])).toBe("§bA inherits")
    expect(legacyText([])).toBe("")
  })

  it("ignores what is not text, and bounds nesting", () => {
    expect(legacyText(null)).toBe("")
    expect(legacyText({ text: "x", color: "not-a-colour" })).toBe("x")
    let deep: unknown = { text: "bottom" }
    for (let i = 0; i < 200; i++) deep = { text: "", extra: [deep] }
    expect(legacyText(deep)).toBe("")
  })
})

describe("plainText", () => {
  it("drops styles and § codes, arrays included", () => {
    expect(plainText({ text: "", extra: [{ text: "§cRed ", color: "red" }, { text: "plain" }] })).toBe("Red plain")
    expect(plainText(["", { text: "Array ", color: "green" }, "motd"])).toBe("Array motd")
  })
})
