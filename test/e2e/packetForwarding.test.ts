/**
 * What the backend learns in the packet modes: Velocity's modern forwarding (a backend that implements its side
 * checks the HMAC and decodes the payload), and the legacy BungeeCord plugin channel (a backend's plugin asks,
 * Portal answers as BungeeCord would).
 */
import { writeFileSync } from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { offlineUuid } from "../../src/protocol/forwarding.js"
import { startPortal } from "../helpers/portal.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { waitFor } from "../helpers/wait.js"
import { connectClient, startPacketBackend } from "../peers/packetPeers.js"
import { startSessionService } from "../peers/sessionService.js"
import { startVelocityBackend } from "../peers/velocityBackend.js"

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

    // A backend that never asks gets nothing, and the player plays.
    const quiet = connectClient(portal.port, { version: "1.20.4", username: "Quiet", host: "plain.example" })
    expect((await quiet.joined)._tag).toBe("Joined")
    expect(velocity.forwarded).toHaveLength(2)
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

const readUtfs = (data: Buffer): Array<string> => {
  const out: Array<string> = []
  for (let at = 0; at + 2 <= data.length; ) {
    const length = data.readUInt16BE(at)
    out.push(data.toString("utf8", at + 2, at + 2 + length))
    at += 2 + length
  }
  return out
}

describe("the legacy BungeeCord channel", () => {
  it("answers PlayerCount, GetServers and UUID, forwards to other servers, and drops what is not permitted", { timeout: 30_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startPacketBackend()
    // One thread: the channel's lists and Forward see the sessions of the thread that relays the asking player.
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = 1\n[forwarding]\nmode = "legacy"\n[forwarding.channel_permissions]\nIP = false\n`, {
      "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "client_only"`,
      "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "offline"`
    })
    const portal = await startPortal(dir.configFile)
    const asker = connectClient(portal.port, { version: "1.20.4", username: "Asker", host: "on.example", session })
    const other = connectClient(portal.port, { version: "1.12.2", username: "Other", host: "off.example" })
    expect((await asker.joined)._tag).toBe("Joined")
    expect((await other.joined)._tag).toBe("Joined")
    const leaked: Array<string> = []
    asker.raw.on("custom_payload", (packet: { channel: string }) => leaked.push(packet.channel))

    // What the backend's plugin hears back, on the server-side connections of each player.
    const heard = new Map<string, Array<Array<string>>>()
    for (const name of ["Asker", "Other"]) {
      heard.set(name, [])
      backend.clients.get(name).on("custom_payload", (packet: { channel: string; data: Buffer }) => {
        if (packet.channel === "bungeecord:main" || packet.channel === "BungeeCord") heard.get(name)!.push(readUtfs(packet.data))
      })
    }
    const ask = (...fields: Array<string | Buffer>) =>
      backend.clients.get("Asker").write("custom_payload", {
        channel: "bungeecord:main",
        data: Buffer.concat(fields.map((field) => (typeof field === "string" ? utf(field) : field)))
      })

    ask("PlayerCount", "ALL")
    ask("PlayerCount", "off")
    ask("GetServers")
    ask("UUID")
    ask("IP")
    ask("Forward", "off", "my:channel", Buffer.from([0, 3, 0x61, 0x62, 0x63]))
    const answers = await waitFor(() => (heard.get("Asker")!.length >= 4 ? heard.get("Asker") : undefined))
    expect(answers[0]!.slice(0, 2)).toEqual(["PlayerCount", "ALL"])
    expect(answers[1]!.slice(0, 2)).toEqual(["PlayerCount", "off"])
    expect(answers[2]![0]).toBe("GetServers")
    expect(answers[2]![1]!.split(", ").sort()).toEqual(["off", "on"])
    expect(answers[3]).toEqual(["UUID", session.account("Asker").id])
    // The counts are ints after the server name.
    const counts = await new Promise<Array<number>>((resolve) => {
      const got: Array<number> = []
      backend.clients.get("Asker").on("custom_payload", (packet: { data: Buffer }) => {
        const fields = readUtfs(packet.data)
        if (fields[0] === "PlayerCount") got.push(packet.data.readInt32BE(packet.data.length - 4))
        if (got.length === 2) resolve(got)
      })
      ask("PlayerCount", "ALL")
      ask("PlayerCount", "off")
    })
    expect(counts).toEqual([2, 1])

    // Forward reached the backend through the other server's player: the channel, a short length, the data.
    const forwarded = await waitFor(() => heard.get("Other")!.find((fields) => fields[0] === "my:channel"))
    expect(forwarded).toEqual(["my:channel", "abc"])
    // IP is not permitted here: no answer, a debug line.
    await portal.waitForLog(/BungeeCord subchannel IP is not permitted/)
    expect(heard.get("Asker")!.some((fields) => fields[0] === "IP")).toBe(false)
    // The channel is between the backend and the proxy: the player never sees it.
    expect(leaked.filter((channel) => channel.toLowerCase().includes("bungeecord"))).toEqual([])
  })
})
