/** Bans on a running proxy: by address (from a PROXY header), by name and by UUID, with the reason shown. */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { BanStore } from "../../src/services/BanStore.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { join, ping, reasonText, startBackend } from "../peers/minecraft.js"

const from = (ip: string) => Buffer.from(`PROXY TCP4 ${ip} 127.0.0.1 40000 25565\r\n`)

describe("bans", () => {
  it("refuse banned addresses, names and UUIDs with the reason, before any backend", async () => {
    const backend = await startBackend("main")
    const now = Math.floor(Date.now() / 1000)
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nreceive_proxy_protocol = true`, {
      "main.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    dir.write(
      "bans.json",
      JSON.stringify({
        bans: [
          { target: { type: "ip", value: "203.0.113.0/24" }, reason: "Botting", created_at: now, expires_at: null, source: "console" },
          { target: { type: "username", value: "Griefer" }, reason: "Griefing spawn", created_at: now, expires_at: now + 7200, source: "console" }
        ],
        audit_log: []
      })
    )
    const portal = await startPortal(dir.configFile)

    const byIp = await join(portal.port, "mc.example.com", { preamble: from("203.0.113.8") })
    expect(byIp._tag === "Kicked" && byIp.reason).toMatch(/banned[\s\S]*Botting[\s\S]*permanent/)
    await expect(ping(portal.port, "mc.example.com", "1.20.4", from("203.0.113.9"))).rejects.toThrow()

    const byName = await join(portal.port, "mc.example.com", { username: "gRIEFER", preamble: from("198.51.100.1") })
    expect(byName._tag === "Kicked" && byName.reason).toMatch(/Griefing spawn[\s\S]*Expires in (1h 59m|2h)/)
    expect(backend.logins).toBe(0)

    // A ban added while running, by UUID (a 1.20.4 client sends its UUID in Login Start).
    const uuid = "5627dd98-e6be-3c21-b8a8-e92344183641" // what minecraft-protocol sends for "Steve" offline
    await portal.run(
      Effect.flatMap(BanStore, (store) => store.add({ target: { type: "uuid", value: uuid.replace(/-/g, "") }, reason: "Alt account", source: "test" }))
    )
    const byUuid = await join(portal.port, "mc.example.com", { username: "Steve", preamble: from("198.51.100.2") })
    expect(byUuid._tag === "Kicked" && byUuid.reason).toMatch(/Alt account/)
    // Others still get in, and the ping of an unbanned address is answered.
    expect(await join(portal.port, "mc.example.com", { username: "Alex", preamble: from("198.51.100.3") })).toEqual({ _tag: "Kicked", reason: "kick: main" })
    expect(reasonText((await ping(portal.port, "mc.example.com", "1.20.4", from("198.51.100.4"))).description)).toBe("motd of main")
    // Lifting a ban applies at once.
    await portal.run(Effect.flatMap(BanStore, (store) => store.remove({ type: "username", value: "griefer" }, "test")))
    expect(await join(portal.port, "mc.example.com", { username: "Griefer", preamble: from("198.51.100.5") })).toEqual({ _tag: "Kicked", reason: "kick: main" })
    const stillBanned = await portal.run(Effect.map(BanStore, (store) => store.dataPlane.ipBan("203.0.113.200", Date.now())))
    expect(stillBanned?.reason).toBe("Botting")
  })
})
