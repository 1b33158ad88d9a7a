/**
 * Probes of the packet modes from outside: versions the other tests do not play, backends that do unusual things in
 * the login, the BungeeCord channel's permissions, reloads while players are online.
 */
import { describe, expect, it } from "vitest"
import { startPortal } from "../helpers/portal.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { connectClient, startPacketBackend } from "../peers/packetPeers.js"
import { startSessionService } from "../peers/sessionService.js"
import { packetIdsFor } from "../../src/protocol/packetIds.js"
import { encodeLoginSuccessBody, encodeLoginPluginRequestBody, decodeLoginPluginResponseBody, encodeSetCompressionBody } from "../../src/protocol/loginPackets.js"
import { encodeDisconnectBody } from "../../src/protocol/gamePackets.js"
import { offlineUuid } from "../../src/protocol/forwarding.js"
import { startScriptedBackend } from "../peers/scriptedBackend.js"
import { Effect } from "effect"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"
import { waitFor } from "../helpers/wait.js"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const servers = (port: number, extra = "") => ({
  "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${port}"]\nproxy_mode = "offline"\n${extra}`,
  "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${port}"]\nproxy_mode = "client_only"\n${extra}`
})

describe("versions", () => {
  const VERSIONS = ["1.7", "1.9.4", "1.10.2", "1.11.2", "1.13.2", "1.14.4", "1.15.2", "1.17.1", "1.18.2", "1.19", "1.19.2", "1.19.3", "1.20", "1.20.2", "1.20.6", "1.21.1", "1.21.5", "1.21.9"]
  it("join and chat in offline and client_only", { timeout: 90_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startPacketBackend({ compressionThreshold: 64 })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, servers(backend.port))
    const portal = await startPortal(dir.configFile)
    const results: Array<string> = []
    let n = 0
    for (const version of VERSIONS) {
      for (const mode of ["off", "on"] as const) {
        n++
        const name = `${mode}${version.replace(/\./g, "_")}`
        const client = connectClient(portal.port, { version, username: name, host: `${mode}.example`, localAddress: `127.0.1.${n}`, ...(mode === "on" ? { session } : {}) })
        const outcome = await Promise.race([client.joined, sleep(8000).then(() => ({ _tag: "Timeout" }))])
        if (outcome._tag === "Joined") {
          client.say(`hi ${name}`)
          await sleep(300)
        }
        results.push(`${name}: ${outcome._tag} ${backend.players.get(name)?.chat.join("|") ?? "-"}`)
        client.leave()
      }
    }
    expect(results).toEqual(results.map((line) => `${line.split(":")[0]}: Joined hi ${line.split(":")[0]}`))
    expect(portal.logs.filter((line) => /^(WARN|ERROR)/.test(line))).toEqual([])
  })
})

const PROTOCOLS: Record<string, number> = { "1.16.5": 754, "1.19.4": 762, "1.20.2": 764, "1.20.4": 765, "1.20.6": 766, "1.21.4": 769 }

describe("a backend's login: plugin questions and compression changes", () => {
  for (const version of ["1.16.5", "1.20.2", "1.20.4", "1.21.4"]) {
    it(`${version}: two plugin requests answered by the player across a change of compression, then a kick in the next state`, { timeout: 20_000 }, async () => {
      const pv = PROTOCOLS[version]!
      const ids = packetIdsFor(pv)!
      const seen: Array<string> = []
      const backend = await startScriptedBackend(async (c) => {
        await c.read() // handshake
        const start = await c.read()
        seen.push(`start ${start.id}`)
        c.send(ids.login.clientbound.setCompression!, encodeSetCompressionBody(64))
        c.threshold = 64
        c.send(ids.login.clientbound.loginPluginRequest!, encodeLoginPluginRequestBody({ messageId: 7, channel: "probe:hello", data: Buffer.alloc(200, 1) }))
        const first = await c.read()
        const answer = decodeLoginPluginResponseBody(first.body)
        seen.push(`response ${first.id} ${answer._tag === "Ok" ? answer.value.messageId : "?"}`)
        c.send(ids.login.clientbound.setCompression!, encodeSetCompressionBody(0))
        c.threshold = 0
        c.send(ids.login.clientbound.loginPluginRequest!, encodeLoginPluginRequestBody({ messageId: 8, channel: "probe:again", data: Buffer.alloc(3, 1) }))
        const second = await c.read()
        const answer2 = decodeLoginPluginResponseBody(second.body)
        seen.push(`response ${second.id} ${answer2._tag === "Ok" ? answer2.value.messageId : "?"}`)
        c.send(ids.login.clientbound.loginSuccess, encodeLoginSuccessBody({ uuid: offlineUuid("Plug"), name: "Plug", properties: [], strictErrorHandling: false }, pv))
        if (ids.configuration !== undefined) {
          const ack = await c.read()
          seen.push(`ack ${ack.id}`)
          c.send(ids.configuration.clientbound.disconnect, encodeDisconnectBody("bye from configuration", pv))
        } else {
          c.send(ids.play.clientbound.disconnect, encodeDisconnectBody("bye from play", pv))
        }
      })
      const dir = makeConfigDir(`bind = "127.0.0.1:0"\n`, { "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"\n` })
      const portal = await startPortal(dir.configFile)
      const client = connectClient(portal.port, { version, username: "Plug", host: "off.example" })
      const outcome = await client.joined
      expect(outcome).toEqual({ _tag: "Kicked", reason: ids.configuration !== undefined ? "bye from configuration" : "bye from play" })
      expect(seen.slice(1, 3)).toEqual([`response ${ids.login.serverbound.loginPluginResponse} 7`, `response ${ids.login.serverbound.loginPluginResponse} 8`])
    })
  }
})

const sessionsOf = (portal: Awaited<ReturnType<typeof startPortal>>) =>
  portal.run(Effect.flatMap(PlayerRegistry, (registry) => registry.list))

describe("client_only: a player that leaves while the session service is asked", () => {
  it("gives its max_players place back, and the next player gets in", { timeout: 30_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, {
      "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "client_only"\nmax_players = 1\n`
    })
    const portal = await startPortal(dir.configFile, { workerLogLevel: "debug" })
    session.mode = "hang"
    const leaver = connectClient(portal.port, { version: "1.20.4", username: "Leaver", host: "on.example", session })
    await waitFor(() => session.asked.length === 1, { what: "hasJoined asked" })
    leaver.raw.socket.destroy()
    const leftAt = Date.now()
    await sleep(200)
    session.mode = "normal"
    const next = connectClient(portal.port, { version: "1.20.4", username: "Next", host: "on.example", session, localAddress: "127.0.0.2" })
    // Without waiting for the session service's answer (it never comes; its timeout is 5 s).
    expect(await next.joined).toEqual({ _tag: "Joined" })
    expect(Date.now() - leftAt).toBeLessThan(4000)
    await portal.waitForLog(/Leaver \(.*\) left while the session service was asked/)
    next.leave()
    await waitFor(async () => (await sessionsOf(portal)).length === 0, { what: "no session left" })
  })
})
