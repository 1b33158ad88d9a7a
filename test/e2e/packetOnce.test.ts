/**
 * One session per player on the proxy in the packet modes, as BungeeCord and Velocity keep it: a second login of a
 * name (offline) or an authenticated account (client_only) is refused while the first plays, on whichever worker
 * either lands and whichever server either asks for, and let in again once the first has left. Two sessions of one
 * account could carry items from one server to another.
 */
import { describe, expect, it } from "vitest"
import { startPortal } from "../helpers/portal.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { waitFor } from "../helpers/wait.js"
import { connectClient } from "../peers/packetPeers.js"
import { startPacketBackend } from "../peers/packetPeers.js"
import { startSessionService } from "../peers/sessionService.js"

const REFUSED = { _tag: "Kicked", reason: expect.stringContaining("You are already connected to this proxy!") }

describe("one session per player in the packet modes", () => {
  it("a second login of a player already on the proxy is refused on either worker and server, and let in once they left", { timeout: 60_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startPacketBackend()
    const server = (domain: string, mode: string) => `domains = ["${domain}"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "${mode}"`
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 2\nso_reuseport = true\n[forwarding]\nmode = "legacy"\n`, {
      "off.toml": server("off.example", "offline"),
      "off2.toml": server("off2.example", "offline"),
      "on.toml": server("on.example", "client_only"),
      "on2.toml": server("on2.example", "client_only")
    })
    const portal = await startPortal(dir.configFile)
    let source = 2
    const from = () => `127.0.0.${source++}`

    for (const [mode, host, other] of [
      ["offline", "off.example", "off2.example"],
      ["client_only", "on.example", "on2.example"]
    ] as const) {
      const online = mode === "client_only" ? { session } : {}
      const name = mode === "offline" ? "Twin" : "Account"
      const first = connectClient(portal.port, { version: "1.20.4", username: name, host, localAddress: from(), ...online })
      expect((await first.joined)._tag).toBe("Joined")
      const joinedOn = /worker=(\d+)/.exec(portal.logs.find((line) => new RegExp(`${name}.* joined `).test(line)) ?? "")?.[1]
      expect(joinedOn, mode).toBeDefined()
      // Attempts from other addresses until one was refused on the other worker (each lands on either: a bounded loop).
      const refusedOn = () => new Set(portal.logs.filter((line) => new RegExp(`refused ${name}.*already connected`, "i").test(line)).map((line) => /worker=(\d+)/.exec(line)?.[1]))
      const otherWorker = joinedOn === "1" ? "2" : "1"
      if (mode === "offline") {
        // offline knows the player by name in any case, as BungeeCord and Velocity do: `twin` and `TWIN` are `Twin`.
        for (const spelled of [name.toLowerCase(), name.toUpperCase()]) {
          const again = connectClient(portal.port, { version: "1.21.4", username: spelled, host: other, localAddress: from() })
          expect(await again.joined, spelled).toEqual(REFUSED)
        }
      }
      for (let attempt = 0; attempt < 16 && !refusedOn().has(otherWorker); attempt++) {
        const again = connectClient(portal.port, { version: "1.21.4", username: name, host: attempt % 2 === 0 ? host : other, localAddress: from(), ...online })
        expect(await again.joined, `${mode}, attempt ${attempt}`).toEqual(REFUSED)
      }
      expect(refusedOn().has(otherWorker), `${mode}: refused on worker ${otherWorker}, where the first did not land`).toBe(true)
      // The first player plays on, and another player is let in meanwhile.
      const before = first.chat.length
      first.say("still here")
      await waitFor(() => (first.chat.length > before ? true : undefined), { what: `${mode}: the first player's chat` })
      const someone = connectClient(portal.port, { version: "1.20.4", username: `${name}Else`, host, localAddress: from(), ...online })
      expect((await someone.joined)._tag).toBe("Joined")
      // Once the first has left, the player comes back.
      first.leave()
      await portal.waitForLog(new RegExp(`${name} .*left `))
      const back = connectClient(portal.port, { version: "1.21.4", username: name, host: other, localAddress: from(), ...online })
      expect((await back.joined)._tag, mode).toBe("Joined")
      back.leave()
      someone.leave()
    }
  })
})
