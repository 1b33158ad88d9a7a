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
import { type ScriptedConnection, startScriptedBackend } from "../peers/scriptedBackend.js"
import { Effect } from "effect"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"
import { waitFor } from "../helpers/wait.js"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const servers = (port: number, extra = "") => ({
  "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${port}"]\nproxy_mode = "offline"\n${extra}`,
  "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${port}"]\nproxy_mode = "client_only"\n${extra}`
})

/** Portal with one offline server, off.example, in front of the backend on `port`. */
const startOfflinePortal = (port: number) => startPortal(makeConfigDir(`bind = "127.0.0.1:0"\n`, { "off.toml": servers(port)["off.toml"] }).configFile)

/** Records the body length of each packet the player sends the scripted backend, until none comes for `idleMs`. */
const recordPackets = async (connection: ScriptedConnection, lengths: Array<number>, idleMs: number): Promise<void> => {
  for (;;) {
    const packet = await connection.read(idleMs).catch(() => undefined)
    if (packet === undefined) return
    lengths.push(packet.body.length)
  }
}

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
        // Then every packet compressed. (Compression off again, a negative threshold, is what vanilla allows too, but
        // minecraft-protocol's client cannot turn it off, so it is not tried here.)
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
      const portal = await startOfflinePortal(backend.port)
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

const endByName = (portal: Awaited<ReturnType<typeof startPortal>>, name: string, reason: string) =>
  portal.run(
    Effect.flatMap(PlayerRegistry, (registry) =>
      Effect.flatMap(registry.list, (sessions) => {
        const session = sessions.find((entry) => entry.name === name)
        return session === undefined ? Effect.succeed(false) : registry.end(session.id, reason)
      })
    )
  )

describe("the state the player is told in", () => {
  for (const version of ["1.20.2", "1.20.6"]) {
    it(`${version}: the backend closes in configuration without a word: a configuration Disconnect in the version's format`, { timeout: 20_000 }, async () => {
      const pv = PROTOCOLS[version]!
      const ids = packetIdsFor(pv)!
      const backend = await startScriptedBackend(async (c) => {
        await c.read()
        await c.read()
        c.send(ids.login.clientbound.setCompression!, encodeSetCompressionBody(256))
        c.threshold = 256
        c.send(ids.login.clientbound.loginSuccess, encodeLoginSuccessBody({ uuid: offlineUuid("Conf"), name: "Conf", properties: [], strictErrorHandling: true }, pv))
        await c.read() // Login Acknowledged
        await sleep(200)
        c.socket.destroy()
      })
      const portal = await startOfflinePortal(backend.port)
      const client = connectClient(portal.port, { version, username: "Conf", host: "off.example" })
      expect(await client.joined).toEqual({ _tag: "Kicked", reason: "§cThe server closed the connection." })
      expect(backend.errors).toEqual([])
    })
  }

  it("client_only: ended from outside while the backend still holds the login: an encrypted login Disconnect", { timeout: 20_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startScriptedBackend(async (c) => {
      await c.read()
      await c.read()
      c.send(0x03, encodeSetCompressionBody(16))
      c.threshold = 16
      await sleep(15_000)
    })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, { "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "client_only"\n` })
    const portal = await startPortal(dir.configFile)
    const client = connectClient(portal.port, { version: "1.20.4", username: "Held", host: "on.example", session })
    await portal.waitForLog(/Held .* joined on/)
    await sleep(300)
    expect(await endByName(portal, "Held", "maintenance")).toBe(true)
    expect(await client.joined).toEqual({ _tag: "Kicked", reason: "maintenance" })
    await portal.waitForLog(/Held .* left on .*ended: maintenance/)
  })
})

import { writeFileSync, unlinkSync } from "node:fs"
import { join as joinPath } from "node:path"

describe("reloads while players are online in the packet modes", () => {
  it("a server file edited or removed and a SIGHUP: the players online keep playing; the new settings apply to new logins", { timeout: 40_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, servers(backend.port))
    const portal = await startPortal(dir.configFile)
    const off = connectClient(portal.port, { version: "1.20.4", username: "Stay", host: "off.example", localAddress: "127.0.2.1" })
    const on = connectClient(portal.port, { version: "1.12.2", username: "StayOn", host: "on.example", session, localAddress: "127.0.2.2" })
    expect((await off.joined)._tag).toBe("Joined")
    expect((await on.joined)._tag).toBe("Joined")
    const serversDir = joinPath(dir.configFile, "..", "servers")
    // Edited: another address (nobody listens), max_players 1; on.toml removed.
    writeFileSync(joinPath(serversDir, "off.toml"), `domains = ["off.example"]\naddresses = ["127.0.0.1:1"]\nproxy_mode = "offline"\nmax_players = 1\n`)
    unlinkSync(joinPath(serversDir, "on.toml"))
    await portal.waitForLog(/servers reloaded/, 10_000)
    // SIGHUP with forwarding changed.
    writeFileSync(dir.configFile, `bind = "127.0.0.1:0"\n[forwarding]\nmode = "none"\nlegacy_channel = false\n`)
    process.kill(process.pid, "SIGHUP")
    await portal.waitForLog(/SIGHUP/, 5000)
    await sleep(2500)
    const ticks = (client: typeof off) => client.chat.filter((line) => line.startsWith("tick")).length
    const [offBefore, onBefore] = [ticks(off), ticks(on)]
    await sleep(2200)
    expect(ticks(off)).toBeGreaterThan(offBefore)
    expect(ticks(on)).toBeGreaterThan(onBefore)
    // The place of the player online counts under the new max_players.
    const third = connectClient(portal.port, { version: "1.20.4", username: "Third", host: "off.example", localAddress: "127.0.2.3" })
    expect(await third.joined).toEqual({ _tag: "Kicked", reason: "§cThe server is full. Please try again later." })
    off.leave()
    on.leave()
    await waitFor(async () => (await sessionsOf(portal)).length === 0, { what: "no session left" })
    const fourth = connectClient(portal.port, { version: "1.20.4", username: "Fourth", host: "off.example", localAddress: "127.0.2.4" })
    expect(await fourth.joined).toEqual({ _tag: "Kicked", reason: "Server is currently unreachable. Please try again later." })
  })
})

import * as net from "node:net"
import { randomBytes } from "node:crypto"
import { encodeHandshake } from "../../src/protocol/handshake.js"
import { encodeLoginStartBody } from "../../src/protocol/login.js"
import { encodeFrame, FrameDecoder, readPacket } from "../../src/protocol/framing.js"
import { encodeVarInt, readVarInt } from "../../src/protocol/varint.js"

/** A hand-made player: handshake and Login Start, then whole packets both ways at the threshold Portal sets. */
const rawPlayer = (port: number, pv: number, name: string) => {
  const socket = net.connect(port, "127.0.0.1")
  socket.on("error", () => {})
  const decoder = new FrameDecoder(undefined, "accept")
  const packets: Array<{ id: number; body: Buffer }> = []
  const ids = packetIdsFor(pv)!
  let threshold = -1
  let loggedIn = false
  let closed = false
  socket.on("close", () => (closed = true))
  socket.on("data", (chunk) => {
    decoder.push(chunk)
    for (;;) {
      const frame = decoder.next()
      if (frame._tag !== "Frame") break
      const packet = readPacket(frame)
      if (packet._tag !== "Packet") break
      packets.push({ id: packet.packetId, body: Buffer.from(packet.body) })
      if (!loggedIn && packet.packetId === ids.login.clientbound.setCompression) {
        const value = readVarInt(packet.body)
        threshold = value._tag === "Value" && value.value >= 0 ? value.value : -1
        decoder.setCompression(threshold)
      }
      if (packet.packetId === ids.login.clientbound.loginSuccess) loggedIn = true
    }
  })
  socket.write(
    Buffer.concat([
      encodeHandshake({ protocolVersion: pv, address: "off.example", port: 25565, nextState: 2 }),
      encodeFrame(ids.login.serverbound.loginStart, encodeLoginStartBody({ name, uuid: offlineUuid(name), protocolVersion: pv }), -1)
    ])
  )
  return {
    socket,
    packets,
    get closed() {
      return closed
    },
    send: (id: number, body: Buffer) => socket.write(encodeFrame(id, body, threshold)),
    sendRaw: (bytes: Buffer) => socket.write(bytes)
  }
}

describe("packets near the limits", () => {
  it("a 4 MiB packet from the backend and a 2 MiB one from the player pass whole; a frame over 2 MiB from the player is refused with a message", { timeout: 30_000 }, async () => {
    const pv = PROTOCOLS["1.16.5"]!
    const ids = packetIdsFor(pv)!
    // 4 MiB that compress well: a chunk of a world is big inflated, small on the wire (over 8 MiB is refused).
    const big = Buffer.concat([randomBytes(1024), Buffer.alloc(4 * 1024 * 1024, 7)])
    const received: Array<number> = []
    let backendClosed = false
    const backend = await startScriptedBackend(async (c) => {
      await c.read()
      await c.read()
      c.send(ids.login.clientbound.setCompression!, encodeSetCompressionBody(256))
      c.threshold = 256
      c.send(ids.login.clientbound.loginSuccess, encodeLoginSuccessBody({ uuid: offlineUuid("Big"), name: "Big", properties: [], strictErrorHandling: false }, pv))
      c.send(0x22, big) // some play packet id; Portal does not read it
      c.socket.on("close", () => (backendClosed = true))
      await recordPackets(c, received, 20_000)
    })
    const portal = await startOfflinePortal(backend.port)
    const player = rawPlayer(portal.port, pv, "Big")
    await waitFor(() => player.packets.find((p) => p.id === 0x22), { what: "the big packet", timeoutMs: 10_000 })
    expect(player.packets.find((p) => p.id === 0x22)!.body.equals(big)).toBe(true)
    // The largest frame a 3-byte length allows, compressed form, its packet 2 MiB of random bytes (stored, not shrunk).
    const body = randomBytes(2 * 1024 * 1024 - 2048)
    player.send(0x0a, body)
    await waitFor(() => received.includes(body.length), { what: "the player's 2 MiB packet on the backend", timeoutMs: 10_000 })
    // A frame whose length needs 4 bytes.
    player.sendRaw(Buffer.concat([encodeVarInt(2_097_152 + 10), Buffer.alloc(64)]))
    await waitFor(() => player.closed, { what: "the player closed" })
    const kick = player.packets.at(-1)!
    expect(kick.id).toBe(ids.play.clientbound.disconnect)
    expect(kick.body.toString()).toContain("Your client sent a packet the proxy could not read")
    await waitFor(() => backendClosed, { what: "the backend closed" })
    await portal.waitForLog(/bad packet from the player: frame length/)
  })
})

describe("legacy_guard in the packet modes", () => {
  it("client_only: the skin and the bungeeguard token; offline: the token alone; a server's own forwarding_mode wins", { timeout: 30_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy_guard"\n`, {
      ...servers(backend.port),
      "plain.toml": `domains = ["plain.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"\nforwarding_mode = "none"\n`
    })
    dir.write("forwarding.secret", "guard-secret-123\n")
    const portal = await startPortal(dir.configFile)
    const on = connectClient(portal.port, { version: "1.21.4", username: "Guarded", host: "on.example", session, localAddress: "127.0.3.1" })
    const off = connectClient(portal.port, { version: "1.8.8", username: "GuardOff", host: "off.example", localAddress: "127.0.3.2" })
    const plain = connectClient(portal.port, { version: "1.20.4", username: "NoGuard", host: "plain.example", localAddress: "127.0.3.3" })
    expect((await on.joined)._tag).toBe("Joined")
    expect((await off.joined)._tag).toBe("Joined")
    expect((await plain.joined)._tag).toBe("Joined")
    const hostOf = (domain: string) => backend.handshakes.map((entry) => entry.host.split("\0")).find((fields) => fields[0] === domain)
    const [onHost, offHost, plainHost] = [hostOf("on.example"), hostOf("off.example"), hostOf("plain.example")]
    const account = session.account("Guarded")
    expect(onHost!.slice(0, 3)).toEqual(["on.example", "127.0.3.1", account.id])
    expect(JSON.parse(onHost![3]!)).toEqual([...account.properties, { name: "bungeeguard-token", value: "guard-secret-123", signature: "" }])
    expect(offHost!.slice(0, 3)).toEqual(["off.example", "127.0.3.2", offlineUuid("GuardOff").replace(/-/g, "")])
    expect(JSON.parse(offHost![3]!)).toEqual([{ name: "bungeeguard-token", value: "guard-secret-123", signature: "" }])
    expect(plainHost).toEqual(["plain.example"])
  })
})

const utf = (text: string) => {
  const bytes = Buffer.from(text, "utf8")
  const out = Buffer.alloc(2 + bytes.length)
  out.writeUInt16BE(bytes.length)
  bytes.copy(out, 2)
  return out
}

describe("the BungeeCord channel: what is off, and Connect", () => {
  it("Connect is logged, not answered; ConnectOther, MessageRaw and KickPlayerRaw are off by default: dropped with a debug line", { timeout: 40_000 }, async () => {
    const backend = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 2\nso_reuseport = true\n`, {
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"\n`
    })
    const portal = await startPortal(dir.configFile, { workerLogLevel: "debug" })
    const players = []
    for (let i = 0; i < 16; i++) {
      const client = connectClient(portal.port, { version: "1.20.4", username: `Sw${i}`, host: "off.example", localAddress: `127.0.4.${i + 1}` })
      expect((await client.joined)._tag).toBe("Joined")
      players.push(client)
    }
    await waitFor(() => backend.clients.size === 16, { what: "sixteen on the backend" })
    for (const [name, connection] of backend.clients) {
      connection.write("custom_payload", { channel: "bungeecord:main", data: Buffer.concat([utf("Connect"), utf("lobby")]) })
      connection.write("custom_payload", { channel: "bungeecord:main", data: Buffer.concat([utf("ConnectOther"), utf(name), utf("lobby")]) })
      connection.write("custom_payload", { channel: "bungeecord:main", data: Buffer.concat([utf("MessageRaw"), utf("ALL"), utf('{"text":"raw"}')]) })
      connection.write("custom_payload", { channel: "bungeecord:main", data: Buffer.concat([utf("KickPlayerRaw"), utf(name), utf('{"text":"raw kick"}')]) })
    }
    await waitFor(() => portal.logs.filter((line) => /BungeeCord subchannel KickPlayerRaw is not permitted/.test(line)).length === 16, { what: "sixteen KickPlayerRaw dropped" })
    expect(portal.logs.filter((line) => /BungeeCord subchannel ConnectOther is not permitted/.test(line))).toHaveLength(16)
    expect(portal.logs.filter((line) => /BungeeCord subchannel MessageRaw is not permitted/.test(line))).toHaveLength(16)
    // Once for the whole proxy, though players on both workers asked (sixteen addresses: all on one worker has a
    // chance of 1 in 32,768).
    const workers = new Set(portal.logs.filter((line) => /Sw\d+ .* joined/.test(line)).map((line) => /worker=(\d)/.exec(line)?.[1]))
    expect(workers).toEqual(new Set(["1", "2"]))
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(portal.logs.filter((line) => /asked for BungeeCord Connect\b/.test(line))).toHaveLength(1)
    for (const client of players) expect(client.chat).not.toContain("raw")
  })
})

describe("the client_only warning", () => {
  it("is given at start, and when a SIGHUP takes the global forwarding away from a client_only server", { timeout: 20_000 }, async () => {
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, {
      "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:1"]\nproxy_mode = "client_only"\n`,
      "bare.toml": `domains = ["bare.example"]\naddresses = ["127.0.0.1:1"]\nproxy_mode = "client_only"\nforwarding_mode = "none"\n`
    })
    const portal = await startPortal(dir.configFile)
    const warning = /client_only authenticates players, but the server has no forwarding/
    await portal.waitForLog(warning)
    expect(portal.logs.filter((line) => warning.test(line)).map((line) => /bare|on\b/.exec(line)?.[0])).toEqual(["bare"])
    writeFileSync(dir.configFile, `bind = "127.0.0.1:0"\n[forwarding]\nmode = "none"\n`)
    process.kill(process.pid, "SIGHUP")
    await portal.waitForLog(/reloaded .*proxy.toml/)
    await waitFor(() => portal.logs.filter((line) => warning.test(line)).length === 2, { what: "the warning for on" })
  })
})

describe("one session per player name across the packet modes", () => {
  it("an offline player cannot take the name of an authenticated player online, nor the other way round", { timeout: 30_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, servers(backend.port))
    const portal = await startPortal(dir.configFile)
    const real = connectClient(portal.port, { version: "1.21.4", username: "Notch", host: "on.example", session, localAddress: "127.0.5.1" })
    expect((await real.joined)._tag).toBe("Joined")
    const fake = connectClient(portal.port, { version: "1.21.4", username: "notch", host: "off.example", localAddress: "127.0.5.2" })
    const fakeOutcome = await fake.joined
    expect(fakeOutcome).toEqual({ _tag: "Kicked", reason: "§cYou are already connected to this proxy!" })
    real.leave()
    await waitFor(async () => (await sessionsOf(portal)).length === 0, { what: "Notch gone" })
    const first = connectClient(portal.port, { version: "1.21.4", username: "Jeb_", host: "off.example", localAddress: "127.0.5.3" })
    expect((await first.joined)._tag).toBe("Joined")
    const second = connectClient(portal.port, { version: "1.21.4", username: "jeb_", host: "on.example", session, localAddress: "127.0.5.4" })
    expect(await second.joined).toEqual({ _tag: "Kicked", reason: "§cYou are already connected to this proxy!" })
  })
})

describe("a backend that turns compression off again", () => {
  it("a negative threshold after a positive one: the player is told, and both ways go uncompressed", { timeout: 20_000 }, async () => {
    const pv = PROTOCOLS["1.16.5"]!
    const ids = packetIdsFor(pv)!
    const received: Array<number> = []
    const backend = await startScriptedBackend(async (c) => {
      await c.read()
      await c.read()
      c.send(ids.login.clientbound.setCompression!, encodeSetCompressionBody(64))
      c.threshold = 64
      c.send(ids.login.clientbound.setCompression!, encodeSetCompressionBody(-1))
      c.threshold = -1
      c.send(ids.login.clientbound.loginSuccess, encodeLoginSuccessBody({ uuid: offlineUuid("Plain"), name: "Plain", properties: [], strictErrorHandling: false }, pv))
      c.send(0x22, Buffer.alloc(300, 5))
      await recordPackets(c, received, 10_000)
    })
    const portal = await startOfflinePortal(backend.port)
    const player = rawPlayer(portal.port, pv, "Plain")
    const big = await waitFor(() => player.packets.find((p) => p.id === 0x22), { what: "the play packet" })
    expect(big.body.equals(Buffer.alloc(300, 5))).toBe(true)
    player.send(0x0a, Buffer.alloc(500, 6))
    await waitFor(() => received.includes(500), { what: "the player's packet on the backend" })
    expect(portal.logs.filter((line) => /bad packet/.test(line))).toEqual([])
  })
})
