/** Bans on a running proxy: by address (from a PROXY header), by name and by UUID, with the reason shown. */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { BanStore } from "../../src/services/BanStore.js"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"
import { waitFor } from "../helpers/wait.js"
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
    expect(stillBanned).toBeDefined()
  })

  it("a ban that comes into force removes the online players it matches, whether added through the store or in the file", async () => {
    const backend = await startBackend("main", { hold: true })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nreceive_proxy_protocol = true`, {
      "main.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    const players = async () => (await portal.run(Effect.flatMap(PlayerRegistry, (registry) => registry.list))).map((p) => p.name).sort()
    for (const [name, ip] of [["Alex", "198.51.100.10"], ["Steve", "198.51.100.11"], ["Notch", "203.0.113.12"]] as const) {
      expect((await join(portal.port, "mc.example.com", { username: name, preamble: from(ip) }))._tag).toBe("Joined")
    }
    expect(await players()).toEqual(["Alex", "Notch", "Steve"])
    // Through the store (what the admin API does): by name.
    await portal.run(Effect.flatMap(BanStore, (store) => store.add({ target: { type: "username", value: "alex" }, reason: "Spam", source: "test" })))
    await waitFor(async () => (await players()).join() === "Notch,Steve", { what: "Alex to be removed" })
    await portal.waitForLog(/removed Alex from main: banned \(Spam\)/)
    // By hand in the file: an address range.
    const now = Math.floor(Date.now() / 1000)
    const file = JSON.parse(readFileSync(path.join(dir.root, "bans.json"), "utf8"))
    file.bans.push({ target: { type: "ip", value: "203.0.113.0/24" }, reason: "Botnet", created_at: now, expires_at: null, source: "console" })
    writeFileSync(path.join(dir.root, "bans.json"), JSON.stringify(file))
    await waitFor(async () => (await players()).join() === "Steve", { what: "Notch to be removed", timeoutMs: 8000 })
    await waitFor(() => backend.players.size === 1, { what: "the backend to see them leave" })
  })
})
