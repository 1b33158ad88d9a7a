import { describe, expect, it } from "vitest"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { connectClient, startPacketBackend } from "../peers/packetPeers.js"
import { startSessionService } from "../peers/sessionService.js"

describe("debug", () => {
  it("joins", { timeout: 30_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, {
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"\n`,
      "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "client_only"\n`
    })
    const portal = await startPortal(dir.configFile)
    const version = process.env.V ?? "1.20.4"
    const a = connectClient(portal.port, { version, username: "Alice", host: "off.example" })
    const b = connectClient(portal.port, { version, username: "Bob", host: "on.example", session })
    const ra = await a.joined
    const rb = await b.joined
    console.log(ra, rb, portal.logs.join("\n"))
    a.say("hello"); b.say("hi")
    await new Promise((r) => setTimeout(r, 2500))
    console.log(a.chat, b.chat, [...backend.players.values()], backend.handshakes)
    expect(ra._tag).toBe("Joined")
  })
})
