/**
 * What the backend learns in the packet modes: Velocity's modern forwarding (a backend that implements its side
 * checks the HMAC and decodes the payload), a 1.19-1.19.2 player's chat key in Login Start, and the legacy
 * BungeeCord plugin channel (a backend's plugin asks, Portal answers as BungeeCord would), proxy-wide with players
 * on two worker threads, and on one thread.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { offlineUuid } from "../../src/protocol/forwarding.js"
import { type RunningPortal, startPortal } from "../helpers/portal.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { waitFor } from "../helpers/wait.js"
import { type ClientOptions, connectClient, type PacketBackend, startPacketBackend } from "../peers/packetPeers.js"
import { startSessionService } from "../peers/sessionService.js"
import { startVelocityBackend } from "../peers/velocityBackend.js"

const mc = createRequire(import.meta.url)("minecraft-protocol")

const SECRET = "a-shared-secret-of-some-length"

const dashed = (id: string) => id.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, "$1-$2-$3-$4-$5")

describe("modern (Velocity) forwarding", () => {
  it("the backend verifies the HMAC and reads address, UUID, name and the profile's properties", { timeout: 30_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const velocity = await startVelocityBackend(SECRET)
    const plain = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "modern"\nsecret_file = "forwarding.secret"\n`, {
      "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${velocity.port}"]\nproxy_mode = "client_only"`,
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${velocity.port}"]\nproxy_mode = "offline"`,
      "plain.toml": `domains = ["plain.example"]\naddresses = ["127.0.0.1:${plain.port}"]\nproxy_mode = "offline"`
    })
    writeFileSync(path.join(dir.root, "forwarding.secret"), `${SECRET}\n`)
    const portal = await startPortal(dir.configFile)

    const online = connectClient(portal.port, { version: "1.21.4", username: "Skinned", host: "on.example", session })
    expect(await online.joined).toEqual({ _tag: "Kicked", reason: "forwarded Skinned" })
    const account = session.account("Skinned")
    expect(velocity.forwarded[0]).toEqual({ version: 4, address: "127.0.0.1", uuid: dashed(account.id), name: "Skinned", properties: account.properties })

    const offline = connectClient(portal.port, { version: "1.13.2", username: "Plain", host: "off.example" })
    expect(await offline.joined).toEqual({ _tag: "Kicked", reason: "forwarded Plain" })
    // A pre-1.19.3 client without a chat key gets version 1.
    expect(velocity.forwarded[1]).toEqual({ version: 1, address: "127.0.0.1", uuid: offlineUuid("Plain"), name: "Plain", properties: [] })

    // Older than 1.13: no login plugin messages, so no modern forwarding.
    const old = connectClient(portal.port, { version: "1.12.2", username: "Old", host: "off.example" })
    expect(await old.joined).toEqual({ _tag: "Kicked", reason: expect.stringMatching(/needs Minecraft 1\.13 or newer/) })
    await portal.waitForLog(/refused Old.*modern forwarding needs Minecraft 1\.13/)

    // A 1.13+ Forge client's marker stays in the handshake, and the forwarded profile says forgeClient, as Velocity's.
    const forge = connectClient(portal.port, { version: "1.20.4", username: "Forged", host: "off.example\0FML3\0" })
    expect(await forge.joined).toEqual({ _tag: "Kicked", reason: "forwarded Forged" })
    expect(velocity.forwarded[2]).toMatchObject({ version: 4, name: "Forged", properties: [{ name: "forgeClient", value: "true" }] })

    // A backend that never asks gets nothing, and the player plays.
    const quiet = connectClient(portal.port, { version: "1.20.4", username: "Quiet", host: "plain.example" })
    expect((await quiet.joined)._tag).toBe("Joined")
    expect(velocity.forwarded).toHaveLength(3)
  })

  it("a 1.19.2 player's chat key is forwarded (version 3) with its holder, the UUID of the Login Start", { timeout: 20_000 }, async () => {
    const velocity = await startVelocityBackend(SECRET, 3)
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "modern"\nsecret_file = "forwarding.secret"\n`, {
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${velocity.port}"]\nproxy_mode = "offline"`
    })
    writeFileSync(path.join(dir.root, "forwarding.secret"), `${SECRET}\n`)
    const portal = await startPortal(dir.configFile)
    const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 1024 })
    const expiresOn = new Date(Date.now() + 3_600_000)
    const signatureV2 = randomBytes(512)
    const holder = "4115abee-1234-4abc-8def-0123456789ab"
    const kicked = await new Promise<string>((resolve) => {
      const client = mc.createClient({
        host: "127.0.0.1",
        port: portal.port,
        fakeHost: "off.example",
        username: "Keyed",
        version: "1.19.2",
        hideErrors: true,
        // An offline login whose Login Start carries a chat key and a UUID, as a 1.19.2 client with an account sends.
        auth: (self: Record<string, unknown>, options: { connect: (client: unknown) => void }) => {
          self.username = "Keyed"
          self.uuid = holder
          self.session = { selectedProfile: { id: holder.replace(/-/g, ""), name: "Keyed" } }
          self.profileKeys = { public: publicKey, private: privateKey, expiresOn, signature: randomBytes(512), signatureV2 }
          options.connect(self)
        }
      })
      client.on("error", () => {})
      client.on("disconnect", (packet: { reason: string }) => resolve(packet.reason))
      client.on("end", () => resolve("end"))
      setTimeout(() => resolve("timeout"), 10_000)
    })
    expect(kicked).toMatch(/forwarded Keyed/)
    const forwarded = velocity.forwarded[0]!
    expect(forwarded.version).toBe(3)
    expect(forwarded.uuid).toBe(offlineUuid("Keyed"))
    expect(forwarded.key?.expiresAt).toBe(BigInt(expiresOn.getTime()))
    expect(forwarded.key?.key.equals(publicKey.export({ type: "spki", format: "der" }))).toBe(true)
    expect(forwarded.key?.signature.equals(signatureV2)).toBe(true)
    expect(forwarded.key?.holder).toBe(holder)
  })

  it("a wrong secret is refused by the backend, and the player sees why", { timeout: 20_000 }, async () => {
    const velocity = await startVelocityBackend("the backend's own secret")
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "modern"\n`, {
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${velocity.port}"]\nproxy_mode = "offline"`
    })
    writeFileSync(path.join(dir.root, "forwarding.secret"), "not the same secret")
    const portal = await startPortal(dir.configFile)
    const client = connectClient(portal.port, { version: "1.20.4", username: "Wrong", host: "off.example" })
    expect(await client.joined).toEqual({ _tag: "Kicked", reason: "Unable to verify player details." })
    expect(velocity.refused).toEqual(["bad HMAC"])
    await portal.waitForLog(/the backend refused the login: Unable to verify player details/)
  })
})

/** Java's DataOutput.writeUTF for ASCII text, and the reading side. */
const utf = (text: string) => {
  const bytes = Buffer.from(text, "utf8")
  const length = Buffer.alloc(2)
  length.writeUInt16BE(bytes.length)
  return Buffer.concat([length, bytes])
}

/** The first `count` UTF fields of an answer (all of them by default), then an int where 4 bytes are left. */
const readFields = (data: Buffer, count = Infinity): Array<string | number> => {
  const out: Array<string | number> = []
  let at = 0
  while (out.length < count && at + 2 <= data.length) {
    const length = data.readUInt16BE(at)
    out.push(data.toString("utf8", at + 2, at + 2 + length))
    at += 2 + length
  }
  if (data.length - at === 4) out.push(data.readInt32BE(at))
  return out
}

const isBungee = (channel: string) => channel === "bungeecord:main" || channel === "BungeeCord"

/** What the backend's plugin hears on the BungeeCord channel through one player's connection, and how it asks. */
const pluginOf = (backend: PacketBackend, name: string) => {
  const heard: Array<Buffer> = []
  const connection = backend.clients.get(name)
  connection.on("custom_payload", (packet: { channel: string; data: Buffer }) => {
    if (isBungee(packet.channel)) heard.push(packet.data)
  })
  return {
    heard,
    ask: (...fields: Array<string | Buffer>) =>
      connection.write("custom_payload", {
        channel: connection.protocolVersion >= 393 ? "bungeecord:main" : "BungeeCord",
        data: Buffer.concat(fields.map((field) => (typeof field === "string" ? utf(field) : field)))
      }),
    /** The next `count` answers after those already taken. */
    answers: async (count: number, from: { taken: number }) => {
      const got = await waitFor(() => (heard.length >= from.taken + count ? heard.slice(from.taken, from.taken + count) : undefined), {
        what: `${count} BungeeCord answers through ${name}`
      })
      from.taken += count
      return got
    }
  }
}

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

let nextAddress = 2

/**
 * Connects a player from a loopback address of its own, again from another one while the worker relaying it is not
 * one `wanted` accepts (the kernel spreads connections by address and port); the worker ("1" or "2") it landed on.
 */
const joinOn = async (portal: RunningPortal, backend: PacketBackend, options: ClientOptions, wanted: (worker: string) => boolean) => {
  const name = escaped(options.username)
  for (let attempt = 0; attempt < 20; attempt++) {
    const localAddress = `127.0.0.${nextAddress++}`
    const client = connectClient(portal.port, { ...options, localAddress })
    expect((await client.joined)._tag).toBe("Joined")
    const line = await portal.waitForLog(new RegExp(`^INFO ${name}\\b.* joined .* ip=${escaped(localAddress)} .*worker=\\d`))
    const worker = /worker=(\d+)/.exec(line)![1]!
    await waitFor(() => backend.clients.has(options.username), { what: `${options.username} on the backend` })
    if (wanted(worker)) return { client, worker, localAddress }
    client.leave()
    await portal.waitForLog(new RegExp(`^INFO ${name}\\b.* left .* ip=${escaped(localAddress)} `))
    await waitFor(() => !backend.clients.has(options.username), { what: `${options.username} gone from the backend` })
  }
  throw new Error(`${options.username} never landed on the worker wanted`)
}

describe("the Login Start the backend gets", () => {
  it("a 1.19-1.19.2 player's chat key reaches the backend in Login Start where the backend's UUID for the player is the key's", { timeout: 30_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, {
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"`,
      "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "client_only"`
    })
    const portal = await startPortal(dir.configFile)
    const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 1024 })
    const expiresOn = new Date(Date.now() + 3_600_000)
    const keyDer = publicKey.export({ type: "spki", format: "der" })
    for (const [version, mode, username] of [["1.19", "off", "KeyedOld"], ["1.19.2", "off", "KeyedOff"], ["1.19.2", "on", "KeyedOn"]] as const) {
      const account = session.account(username)
      const signature = randomBytes(512)
      const signatureV2 = randomBytes(512)
      const joined = new Promise<string>((resolve) => {
        const client = mc.createClient({
          host: "127.0.0.1",
          port: portal.port,
          fakeHost: `${mode}.example`,
          username,
          version,
          hideErrors: true,
          sessionServer: session.url,
          // A login whose Login Start carries a chat key and the account's UUID, as a client with an account sends;
          // online against the fake session service in client_only (the Encryption Response is then signed with the key).
          auth: (self: Record<string, unknown>, options: Record<string, unknown> & { connect: (client: unknown) => void }) => {
            self.username = username
            self.uuid = dashed(account.id)
            self.session = { accessToken: account.accessToken, selectedProfile: { id: account.id, name: username } }
            self.profileKeys = { public: publicKey, private: privateKey, expiresOn, signature, signatureV2 }
            if (mode === "on") {
              options.accessToken = account.accessToken
              options.haveCredentials = true
            }
            options.connect(self)
          }
        })
        client.on("error", () => {})
        client.on("system_chat", () => resolve("joined"))
        client.on("disconnect", (packet: { reason: string }) => resolve(packet.reason))
        client.on("kick_disconnect", (packet: { reason: string }) => resolve(packet.reason))
        client.on("end", () => resolve("end"))
        setTimeout(() => resolve("timeout"), 10_000)
      })
      expect({ username, outcome: await joined }).toEqual({ username, outcome: "joined" })
      const seen = backend.loginStarts.find((entry) => entry.name === username)
      if (version === "1.19.2" && mode === "off") {
        // 1.19.1+ signs the key for the account's UUID; the backend knows this player by the offline-mode UUID and
        // would refuse the key as forged: it stays out.
        expect(seen, username).toEqual({ name: username, uuid: offlineUuid(username), key: undefined })
        continue
      }
      expect(seen?.key?.timestamp, username).toBe(BigInt(expiresOn.getTime()))
      expect(seen?.key?.publicKey.equals(keyDer), username).toBe(true)
      // 1.19 signs the key alone; 1.19.1+ with the UUID it was issued for, the authenticated one in client_only.
      expect(seen?.key?.signature.equals(version === "1.19" ? signature : signatureV2), username).toBe(true)
      expect(seen?.uuid, username).toBe(version === "1.19" ? undefined : dashed(account.id))
    }
  })
})

describe("configuration warnings on reload", () => {
  it("a server file changed to client_only without forwarding is warned about when it arrives, once", { timeout: 20_000 }, async () => {
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 1`, { "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:1"]` })
    const portal = await startPortal(dir.configFile)
    const warning = /WARN .*\/servers\/on\.toml: proxy_mode: client_only authenticates players, but the server has no forwarding/
    expect(portal.logs.some((line) => warning.test(line))).toBe(false)
    dir.write("servers/on.toml", `domains = ["on.example"]\naddresses = ["127.0.0.1:1"]\nproxy_mode = "client_only"`)
    await portal.waitForLog(warning)
    // Another change that keeps it: said once, not on every reload.
    dir.write("servers/on.toml", `domains = ["on.example"]\naddresses = ["127.0.0.1:2"]\nproxy_mode = "client_only"`)
    await waitFor(() => portal.logs.filter((line) => /servers reloaded: changed on/.test(line)).length === 2, { what: "the second reload" })
    expect(portal.logs.filter((line) => warning.test(line))).toHaveLength(1)
  })
})

describe("the legacy BungeeCord channel", () => {
  it(
    "with two workers answers and delivers proxy-wide: counts, lists and lookups of players on the other worker, Forward, ForwardToPlayer, Message and KickPlayer to them",
    { timeout: 60_000 },
    async () => {
      const session = await startSessionService()
      process.env.PORTAL_SESSION_SERVER = session.url
      const backend = await startPacketBackend()
      const dir = makeConfigDir(
        `bind = "127.0.0.1:0"\nworker_threads = 2\nso_reuseport = true\n[forwarding]\nmode = "legacy"\n` +
          `[forwarding.channel_permissions]\nIP = false\nMessage = true\nKickPlayer = true\n`,
        {
          "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "client_only"`,
          "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"`,
          // Nobody joins it: there for ServerIP, which answers its host name resolved.
          "named.toml": `domains = ["named.example"]\naddresses = ["localhost:25999"]`
        }
      )
      const portal = await startPortal(dir.configFile, { workerLogLevel: "debug" })
      // The asking player on one worker, the other player (alone on its server) on the other one.
      const asker = await joinOn(portal, backend, { version: "1.20.4", username: "Asker", host: "on.example", session }, () => true)
      const other = await joinOn(portal, backend, { version: "1.12.2", username: "Other", host: "off.example" }, (worker) => worker !== asker.worker)
      const leaked: Array<string> = []
      asker.client.raw.on("custom_payload", (packet: { channel: string }) => leaked.push(packet.channel))

      const plugin = pluginOf(backend, "Asker")
      const onOther = pluginOf(backend, "Other")
      const taken = { taken: 0 }
      plugin.ask("PlayerCount", "ALL")
      plugin.ask("PlayerCount", "off")
      plugin.ask("PlayerList", "ALL")
      plugin.ask("PlayerList", "off")
      plugin.ask("GetPlayerServer", "other")
      plugin.ask("GetPlayerServer", "Nobody")
      plugin.ask("UUIDOther", "Other")
      plugin.ask("IPOther", "OTHER")
      plugin.ask("GetServers")
      plugin.ask("UUID")
      plugin.ask("IP")
      plugin.ask("ServerIP", "named")
      // Answers come in the order asked, lookups (answered by the main thread) included.
      const [countAll, countOff, listAll, listOff, playerServer, nobodyServer, uuidOther, ipOther, servers, uuid, serverIp] = await plugin.answers(11, taken)
      expect(readFields(countAll!, 2)).toEqual(["PlayerCount", "ALL", 2])
      expect(readFields(countOff!, 2)).toEqual(["PlayerCount", "off", 1])
      const all = readFields(listAll!)
      expect(all.slice(0, 2)).toEqual(["PlayerList", "ALL"])
      expect(String(all[2]).split(", ").sort()).toEqual(["Asker", "Other"])
      expect(readFields(listOff!)).toEqual(["PlayerList", "off", "Other"])
      expect(readFields(playerServer!)).toEqual(["GetPlayerServer", "other", "off"])
      expect(readFields(nobodyServer!)).toEqual(["GetPlayerServer", "Nobody", ""])
      expect(readFields(uuidOther!)).toEqual(["UUIDOther", "Other", offlineUuid("Other").replace(/-/g, "")])
      expect(readFields(ipOther!, 3)).toEqual(["IPOther", "Other", other.localAddress, expect.any(Number)])
      expect(readFields(servers!)[0]).toBe("GetServers")
      expect(String(readFields(servers!)[1]).split(", ").sort()).toEqual(["named", "off", "on"])
      expect(readFields(uuid!)).toEqual(["UUID", session.account("Asker").id])
      const [serverIpTag, serverIpName, resolved] = readFields(serverIp!, 3)
      expect([serverIpTag, serverIpName]).toEqual(["ServerIP", "named"])
      expect(["127.0.0.1", "::1"]).toContain(resolved)

      // The other way round: Other's backend connection asks about Asker, on the first worker.
      const otherTaken = { taken: 0 }
      onOther.ask("GetPlayerServer", "Asker")
      onOther.ask("PlayerList", "on")
      const [askerServer, listOn] = await onOther.answers(2, otherTaken)
      expect(readFields(askerServer!)).toEqual(["GetPlayerServer", "Asker", "on"])
      expect(readFields(listOn!)).toEqual(["PlayerList", "on", "Asker"])

      // Deliveries to the player on the other worker.
      plugin.ask("Forward", "off", "my:channel", Buffer.from([0, 3, 0x61, 0x62, 0x63]))
      plugin.ask("Forward", "ALL", "all:channel", Buffer.from([0, 1, 0x7a]))
      plugin.ask("ForwardToPlayer", "Other", "to:player", Buffer.from([0, 2, 0x68, 0x69]))
      plugin.ask("Message", "Other", "hello from Asker")
      const delivered = await onOther.answers(3, otherTaken)
      expect(delivered.map((data) => readFields(data))).toEqual([
        ["my:channel", "abc"],
        ["all:channel", "z"],
        ["to:player", "hi"]
      ])
      await waitFor(() => other.client.chat.includes("hello from Asker"), { what: "the message on the other worker" })
      // Forward ALL skips the asker's own server.
      expect(plugin.heard).toHaveLength(11)

      // IP is not permitted here: no answer, a debug line.
      await portal.waitForLog(/BungeeCord subchannel IP is not permitted/)
      plugin.ask("KickPlayer", "other", "kicked by a plugin")
      expect(await other.client.ended).toBe("kicked by a plugin")
      await portal.waitForLog(new RegExp(`^INFO Other .* left .* ip=${escaped(other.localAddress)} `))
      plugin.ask("PlayerList", "ALL")
      const [afterKick] = await plugin.answers(1, taken)
      expect(readFields(afterKick!)).toEqual(["PlayerList", "ALL", "Asker"])
      // The channel is between the backend and the proxy: the player never sees it.
      expect(leaked.filter((channel) => channel.toLowerCase().includes("bungeecord"))).toEqual([])
    }
  )

  it("on one thread answers from its own registry and delivers directly", { timeout: 30_000 }, async () => {
    const backend = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 1\n[forwarding]\nmode = "legacy"\n[forwarding.channel_permissions]\nUUID = false\nKickPlayerRaw = true\n`, {
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"`,
      "more.toml": `domains = ["more.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"`
    })
    const portal = await startPortal(dir.configFile)
    const asker = connectClient(portal.port, { version: "1.20.4", username: "Asker", host: "off.example" })
    const other = connectClient(portal.port, { version: "1.12.2", username: "Other", host: "more.example" })
    expect((await asker.joined)._tag).toBe("Joined")
    expect((await other.joined)._tag).toBe("Joined")
    await waitFor(() => backend.clients.has("Asker") && backend.clients.has("Other"), { what: "both on the backend" })
    const plugin = pluginOf(backend, "Asker")
    const onOther = pluginOf(backend, "Other")
    const taken = { taken: 0 }
    plugin.ask("PlayerCount", "ALL")
    plugin.ask("PlayerList", "ALL")
    plugin.ask("GetPlayerServer", "Other")
    plugin.ask("UUID")
    plugin.ask("ForwardToPlayer", "Other", "to:player", Buffer.from([0, 2, 0x68, 0x69]))
    plugin.ask("Forward", "ALL", "all:channel", Buffer.from([0, 1, 0x7a]))
    const [count, list, server] = await plugin.answers(3, taken)
    expect(readFields(count!, 2)).toEqual(["PlayerCount", "ALL", 2])
    expect(String(readFields(list!)[2]).split(", ").sort()).toEqual(["Asker", "Other"])
    expect(readFields(server!)).toEqual(["GetPlayerServer", "Other", "more"])
    const delivered = await onOther.answers(2, { taken: 0 })
    expect(delivered.map((data) => readFields(data))).toEqual([
      ["to:player", "hi"],
      ["all:channel", "z"]
    ])
    await portal.waitForLog(/BungeeCord subchannel UUID is not permitted/)
    expect(plugin.heard).toHaveLength(3)

    // KickPlayerRaw: the player sees the plugin's text as it wrote it, formatting and translation keys included.
    const kicked = new Promise<unknown>((resolve) => other.raw.once("kick_disconnect", (packet: { reason: unknown }) => resolve(packet.reason)))
    const raw = { text: "raw kick", bold: true, color: "green", extra: [{ translate: "multiplayer.disconnect.kicked", italic: true }] }
    plugin.ask("KickPlayerRaw", "Other", JSON.stringify(raw))
    expect(JSON.parse(String(await kicked))).toEqual({ text: "", extra: [raw] })
    await portal.waitForLog(/Other .* left more .*ended: raw kick/)
  })

  it("a player cannot pose as the proxy: its BungeeCord messages are dropped, its other channels pass", { timeout: 30_000 }, async () => {
    const backend = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 1\n[forwarding]\nmode = "legacy"\n`, {
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"`
    })
    const portal = await startPortal(dir.configFile)
    const player = connectClient(portal.port, { version: "1.20.4", username: "Poser", host: "off.example" })
    expect((await player.joined)._tag).toBe("Joined")
    await waitFor(() => backend.clients.has("Poser"), { what: "the player on the backend" })
    const heard: Array<string> = []
    backend.clients.get("Poser").on("custom_payload", (packet: { channel: string }) => heard.push(packet.channel))
    player.raw.write("custom_payload", { channel: "bungeecord:main", data: utf("KickPlayer") })
    player.raw.write("custom_payload", { channel: "portal:hello", data: Buffer.from([1, 2, 3]) })
    await waitFor(() => (heard.includes("portal:hello") ? true : undefined), { what: "the player's own channel on the backend" })
    await portal.waitForLog(/dropped a bungeecord:main plugin message from the player/)
    expect(heard).toEqual(["portal:hello"])

    // In configuration too: a backend that reconfigures its player must not hear the player pose as the proxy either.
    const serverSide = backend.clients.get("Poser")
    const acknowledged = new Promise((resolve) => serverSide.once("configuration_acknowledged", resolve))
    serverSide.write("start_configuration", {})
    await acknowledged
    serverSide.state = "configuration"
    player.raw.write("custom_payload", { channel: "bungeecord:main", data: Buffer.concat([utf("Forward"), utf("ALL")]) })
    player.raw.write("custom_payload", { channel: "portal:again", data: Buffer.from([4]) })
    await waitFor(() => (heard.includes("portal:again") ? true : undefined), { what: "the player's channel in configuration" })
    await waitFor(() => portal.logs.filter((line) => /dropped a bungeecord:main plugin message from the player/.test(line)).length === 2, { what: "the second message dropped" })
    expect(heard).toEqual(["portal:hello", "portal:again"])
  })

  it("a backend that compresses every packet (threshold 0): its requests are answered, its state changes and kicks followed", { timeout: 30_000 }, async () => {
    const backend = await startPacketBackend({ compressionThreshold: 0 })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 1\n[forwarding]\nmode = "legacy"\n`, {
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"`
    })
    const portal = await startPortal(dir.configFile)
    const player = connectClient(portal.port, { version: "1.21.4", username: "Squeezed", host: "off.example" })
    expect((await player.joined)._tag).toBe("Joined")
    await waitFor(() => backend.clients.has("Squeezed"), { what: "the player on the backend" })
    const leaked: Array<string> = []
    player.raw.on("custom_payload", (packet: { channel: string }) => leaked.push(packet.channel))
    const plugin = pluginOf(backend, "Squeezed")
    plugin.ask("GetServer")
    const [answer] = await plugin.answers(1, { taken: 0 })
    expect(readFields(answer!)).toEqual(["GetServer", "off"])
    // A reconfiguration and back: Portal follows both compressed state changes, so the channel answers again after.
    const serverSide = backend.clients.get("Squeezed")
    const acknowledged = new Promise((resolve) => serverSide.once("configuration_acknowledged", resolve))
    serverSide.write("start_configuration", {})
    await acknowledged
    serverSide.state = "configuration"
    const finished = new Promise((resolve) => serverSide.once("finish_configuration", resolve))
    serverSide.write("finish_configuration", {})
    await finished
    serverSide.state = "play"
    plugin.ask("GetServer")
    await plugin.answers(1, { taken: 1 })
    expect(leaked.filter(isBungee)).toEqual([])
    // The backend's kick in play, compressed: the player reads it as a play Disconnect and the session ends at once.
    serverSide.write("kick_disconnect", { reason: { type: "compound", name: "", value: { text: { type: "string", value: "squeezed out" } } } })
    expect(await player.ended).toBe("squeezed out")
    await portal.waitForLog(/Squeezed .* left off after .*\(backend closed;/)
  })
})
