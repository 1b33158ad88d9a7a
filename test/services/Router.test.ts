/** Router precedence: exact beats wildcard, the longest wildcard suffix wins, wildcards never match their apex. */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { decodeServerText } from "../../src/schema/decode.js"
import { buildDomainIndex, resolveHost } from "../../src/services/Router.js"

const server = (id: string, domains: Array<string>) =>
  Either.getOrThrow(decodeServerText(`${id}.toml`, `${id}.toml`, `addresses = ["a"]\ndomains = ${JSON.stringify(domains)}`))

const index = buildDomainIndex([
  server("apex", ["example.com"]),
  server("exact", ["play.mc.example.com"]),
  server("mc", ["*.mc.example.com"]),
  server("any", ["*.example.com"]),
  server("other", ["other.net", "*.deep.other.net"])
])
const route = (host: string) => resolveHost(index, host)?.id

describe("Router", () => {
  it("exact domains win over wildcards", () => {
    expect(route("play.mc.example.com")).toBe("exact")
    expect(route("example.com")).toBe("apex")
  })

  it("the longest wildcard suffix wins, at any depth", () => {
    expect(route("lobby.mc.example.com")).toBe("mc")
    expect(route("a.b.c.mc.example.com")).toBe("mc")
    expect(route("shop.example.com")).toBe("any")
    expect(route("x.y.example.com")).toBe("any")
  })

  it("a wildcard does not match its own apex, nor unrelated names", () => {
    expect(route("mc.example.com")).toBe("any")
    expect(route("deep.other.net")).toBeUndefined()
    expect(route("a.deep.other.net")).toBe("other")
    expect(route("notexample.com")).toBeUndefined()
    expect(route("")).toBeUndefined()
    expect(route("com")).toBeUndefined()
  })
})
