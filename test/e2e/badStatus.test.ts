/**
 * A backend that answers a status request with something that is not a status JSON object: a real client pinging
 * through Portal gets the `unreachable` MOTD (or the stale cached answer), and the log one warning naming the server,
 * the address and the reason, never "connection failed unexpectedly".
 */
import { describe, expect, it } from "vitest"
import { makeConfigDir } from "../helpers/tempdir.js"
import { type RunningPortal, startPortal } from "../helpers/portal.js"
import { ping, reasonText } from "../peers/minecraft.js"
import { BAD_ANSWERS, GOOD_STATUS, startStatusBackend, statusAnswer } from "../peers/statusBackend.js"

const configFor = (port: number, proxyExtra = "") =>
  makeConfigDir(`bind = "127.0.0.1:0"\nconnect_timeout = "1s"\n${proxyExtra}`, {
    "s.toml": `domains = ["s.example.com"]\naddresses = ["127.0.0.1:${port}"]`
  })

const statusLines = (portal: RunningPortal) => portal.logs.filter((line) => line.includes("status of s"))
const unexpected = (portal: RunningPortal) => portal.logs.filter((line) => line.includes("failed unexpectedly"))

describe("a backend's bad status answer", () => {
  it.each(BAD_ANSWERS)("$kind: the client gets the unreachable MOTD, the log one warning", async ({ bytes, reason }) => {
    const backend = await startStatusBackend(bytes)
    const portal = await startPortal(configFor(backend.port).configFile)
    const answer = await ping(portal.port, "s.example.com")
    expect(reasonText(answer.description)).toMatch(/cannot be reached/)
    const warning = await portal.waitForLog(/status of s from/)
    const address = `127\\.0\\.0\\.1:${backend.port}`
    expect(warning).toMatch(new RegExp(`^WARN status of s from ${address} failed: .*; showing the unreachable MOTD server=s$`))
    expect(warning).toMatch(reason)
    expect(statusLines(portal)).toEqual([warning])
    expect(unexpected(portal)).toEqual([])
    // The next ping is a new fetch (nothing was cached), with its own line, and Portal still answers.
    expect(reasonText((await ping(portal.port, "s.example.com")).description)).toMatch(/cannot be reached/)
    expect(statusLines(portal)).toHaveLength(2)
    expect(backend.connections()).toBe(2)
  })

  it("a good answer passes whole: unknown fields (a mod's, an extra one in version) are kept", async () => {
    const backend = await startStatusBackend(statusAnswer(JSON.stringify(GOOD_STATUS)))
    const portal = await startPortal(configFor(backend.port).configFile)
    const answer = await ping(portal.port, "s.example.com")
    expect(answer).toMatchObject(GOOD_STATUS)
    expect(statusLines(portal)).toEqual([])
  })

  it("after the ttl, a bad answer gives the stale cached answer, with one warning saying so", async () => {
    const backend = await startStatusBackend(statusAnswer(JSON.stringify(GOOD_STATUS)))
    const portal = await startPortal(configFor(backend.port, `[status_cache]\nttl = "200ms"`).configFile)
    expect(reasonText((await ping(portal.port, "s.example.com")).description)).toBe("raw backend says hi")
    backend.answer = statusAnswer("null")
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(reasonText((await ping(portal.port, "s.example.com")).description)).toBe("raw backend says hi")
    expect(backend.connections()).toBe(2)
    const warning = await portal.waitForLog(/status of s from/)
    expect(warning).toMatch(
      new RegExp(`^WARN status of s from 127\\.0\\.0\\.1:${backend.port} failed: not a status answer: expected a JSON object, got null; serving the last good answer server=s$`)
    )
    expect(statusLines(portal)).toEqual([warning])
    expect(unexpected(portal)).toEqual([])
  })

  it("concurrent pings of a broken backend share one fetch and one warning", async () => {
    const backend = await startStatusBackend(statusAnswer("[]"), { delayMs: 400 })
    const portal = await startPortal(configFor(backend.port).configFile)
    const answers = await Promise.all(Array.from({ length: 6 }, () => ping(portal.port, "s.example.com")))
    expect(answers.map((answer) => reasonText(answer.description))).toEqual(Array(6).fill("§cThis server cannot be reached right now."))
    expect(backend.connections()).toBe(1)
    expect(statusLines(portal)).toHaveLength(1)
    expect(unexpected(portal)).toEqual([])
  })

  it("a backend that accepts and closes without answering is a failed fetch with a warning", async () => {
    const backend = await startStatusBackend(Buffer.alloc(0))
    const portal = await startPortal(configFor(backend.port).configFile)
    expect(reasonText((await ping(portal.port, "s.example.com")).description)).toMatch(/cannot be reached/)
    expect(await portal.waitForLog(/status of s from/)).toMatch(/failed: closed the connection without answering; showing the unreachable MOTD/)
  })
})
