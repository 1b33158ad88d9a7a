/**
 * StatusService's answers say how long they may be reused (workers reuse them for that long): what is left of the
 * cache entry's ttl, a second at most for a composed answer, nothing for a fallback after a failed fetch.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { COMPOSED_REUSE_MS, StatusService } from "../../src/services/StatusService.js"
import { freePort } from "../helpers/net.js"
import { startPortal } from "../helpers/portal.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startBackend } from "../peers/minecraft.js"

const answerFor = (portal: Awaited<ReturnType<typeof startPortal>>, serverId: string | undefined, state: "online" | "sleeping" = "online") =>
  portal.run(
    Effect.gen(function* () {
      const snapshot = yield* ConfigStore.pipe(Effect.flatMap((store) => store.get))
      const status = yield* StatusService
      return yield* status.answer({
        server: serverId === undefined ? undefined : snapshot.servers.get(serverId),
        state,
        handshake: { protocolVersion: 767, address: "x.example.com", port: 25565, nextState: 1 },
        clientIp: "127.0.0.1",
        preamble: undefined
      })
    })
  )

describe("StatusService: how long an answer may be reused", () => {
  it("a fetched answer for the ttl, a cached one for what is left of it", async () => {
    const backend = await startBackend("live")
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[status_cache]\nttl = "10s"`, {
      "live.toml": `domains = ["live.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    const fetched = await answerFor(portal, "live")
    expect(fetched.source).toBe("backend")
    expect(fetched.reuseForMs).toBeGreaterThan(9_000)
    expect(fetched.reuseForMs).toBeLessThanOrEqual(10_000)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const cached = await answerFor(portal, "live")
    expect(cached.source).toBe("cache")
    expect(cached.reuseForMs).toBeLessThanOrEqual(fetched.reuseForMs - 250)
    expect(cached.reuseForMs).toBeGreaterThan(8_000)
  })

  it("a composed answer for a second at most, and never past the ttl", async () => {
    const backend = await startBackend("asleep")
    const server = `domains = ["s.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    const portal = await startPortal(makeConfigDir(`bind = "127.0.0.1:0"`, { "s.toml": server }).configFile)
    const sleeping = await answerFor(portal, "s", "sleeping")
    expect(sleeping.source).toBe("composed")
    expect(sleeping.reuseForMs).toBe(COMPOSED_REUSE_MS)
    expect((await answerFor(portal, undefined)).reuseForMs).toBe(COMPOSED_REUSE_MS)
    const short = await startPortal(makeConfigDir(`bind = "127.0.0.1:0"\n[status_cache]\nttl = "200ms"`, { "s.toml": server }).configFile)
    expect((await answerFor(short, "s", "sleeping")).reuseForMs).toBe(200)
  })

  it("the unreachable answer that stands in for a failed fetch not at all", async () => {
    const port = await freePort()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nconnect_timeout = "1s"`, { "down.toml": `domains = ["d.example.com"]\naddresses = ["127.0.0.1:${port}"]` })
    const portal = await startPortal(dir.configFile)
    const answer = await answerFor(portal, "down")
    expect(answer.state).toBe("unreachable")
    expect(answer.reuseForMs).toBe(0)
  })
})
