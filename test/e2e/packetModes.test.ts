/**
 * The packet modes with real peers: minecraft-protocol clients of many versions through Portal in `offline` and in
 * `client_only` (online-mode clients against a fake session service), minecraft-protocol backends that compress;
 * chat and keep-alives both ways for 20 s; what the backend learns through legacy forwarding; ending a session
 * from outside in play; the backend's kicks; the backend closing; a backend that cannot be reached.
 */
import { Effect } from "effect"
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { offlineUuid } from "../../src/protocol/forwarding.js"
import { supportedRangeText } from "../../src/protocol/packetIds.js"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"
import { startPortal } from "../helpers/portal.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { waitFor } from "../helpers/wait.js"
import { connectClient, NEWEST_VERSION, type PacketClient, serverChat, startPacketBackend } from "../peers/packetPeers.js"
import { startSessionService } from "../peers/sessionService.js"

const VERSIONS = [...new Set(["1.8.8", "1.12.2", "1.16.5", "1.19.4", "1.20.1", "1.20.4", "1.21.4", NEWEST_VERSION])]
const PLAY_MS = 20_000

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const servers = (port: number, extra = "") => ({
  "off.toml": `domains = ["off.example"]\naddresses = ["127.0.0.1:${port}"]\nproxy_mode = "offline"\n${extra}`,
  "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${port}"]\nproxy_mode = "client_only"\n${extra}`
})

/** Portal with legacy forwarding in front of `off.example` (offline) and `on.example` (client_only) on one packet backend. */
const startBoth = async () => {
  const session = await startSessionService()
  process.env.PORTAL_SESSION_SERVER = session.url
  const backend = await startPacketBackend()
  const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, servers(backend.port))
  return { session, backend, portal: await startPortal(dir.configFile) }
}

const endSession = (portal: Awaited<ReturnType<typeof startPortal>>, name: string, reason: string) =>
  portal.run(
    Effect.flatMap(PlayerRegistry, (registry) =>
      Effect.flatMap(registry.list, (sessions) => {
        const session = sessions.find((entry) => entry.name === name)
        return session === undefined ? Effect.succeed(false) : registry.end(session.id, reason)
      })
    )
  )

describe("packet modes with real clients", () => {
  it(`${VERSIONS.join(", ")}: play for 20 s in offline and client_only; legacy forwarding carries the authenticated player`, { timeout: 60_000 }, async () => {
    const { session, backend, portal } = await startBoth()
    const players: Array<{ name: string; mode: "off" | "on"; client: PacketClient; localAddress: string }> = []
    for (const version of VERSIONS) {
      for (const mode of ["off", "on"] as const) {
        const name = `${mode}_${version.replace(/\./g, "_")}`
        // Each from its own loopback address: sixteen logins at once from one address would meet the bound on
        // handshakes in progress per address.
        const localAddress = `127.0.0.${10 + players.length}`
        players.push({
          name,
          mode,
          localAddress,
          client: connectClient(portal.port, { version, username: name, host: `${mode}.example`, localAddress, ...(mode === "on" ? { session } : {}) })
        })
      }
    }
    const joined = await Promise.all(players.map(({ client }) => client.joined))
    expect(joined.map((result, i) => `${players[i]!.name}: ${result._tag}`)).toEqual(players.map(({ name }) => `${name}: Joined`))

    const chatter = setInterval(() => {
      for (const { name, client } of players) client.say(`hello from ${name}`)
    }, 1000)
    await sleep(PLAY_MS)
    clearInterval(chatter)

    for (const { name, mode, client, localAddress } of players) {
      const onBackend = backend.players.get(name)
      // Both ways, for the whole time: the backend's chat every second and keep-alives every 4 s, the player's chat
      // every second and its keep-alive answers.
      expect({ name, ticks: client.chat.filter((line) => line.startsWith("tick")).length >= PLAY_MS / 1000 - 3 }).toEqual({ name, ticks: true })
      expect({ name, keepAlives: client.keepAlives >= 3 }).toEqual({ name, keepAlives: true })
      expect({ name, chat: (onBackend?.chat.filter((line) => line === `hello from ${name}`).length ?? 0) >= PLAY_MS / 1000 - 3 }).toEqual({ name, chat: true })
      expect({ name, answers: (onBackend?.keepAlives ?? 0) >= 3 }).toEqual({ name, answers: true })
      // Legacy forwarding: host, address, UUID and, for authenticated players, the profile's properties (the skin).
      const handshake = backend.handshakes.find((entry) => entry.host.split("\0")[2] !== undefined && (mode === "on" ? entry.host.includes(session.account(name).id) : entry.host.includes(offlineUuid(name).replace(/-/g, ""))))
      expect(handshake, name).toBeDefined()
      const [host, ip, uuid, properties] = handshake!.host.split("\0")
      expect([host, ip]).toEqual([`${mode}.example`, localAddress])
      if (mode === "on") {
        const account = session.account(name)
        expect(uuid).toBe(account.id)
        expect(JSON.parse(properties!)).toEqual(account.properties)
      } else {
        expect(uuid).toBe(offlineUuid(name).replace(/-/g, ""))
        expect(properties).toBeUndefined()
      }
    }
    // Every online player was checked with the session service, by name and the server hash.
    expect(session.asked.map((entry) => entry.username).sort()).toEqual(players.filter(({ mode }) => mode === "on").map(({ name }) => name).sort())

    // Ended from outside in play: each player is told why, in its version's format (JSON before 1.20.3, NBT after).
    const oldest = players.filter(({ name }) => name.endsWith(VERSIONS[0]!.replace(/\./g, "_")))
    const newest = players.filter(({ name }) => name.endsWith(NEWEST_VERSION.replace(/\./g, "_")))
    for (const { name } of [...oldest, ...newest]) expect(await endSession(portal, name, `kicked ${name}`)).toBe(true)
    for (const { name, client } of [...oldest, ...newest]) expect(await client.ended).toBe(`kicked ${name}`)
    await portal.waitForLog(/left off after .*\(ended: kicked off_/)
  })

  it("a 1.20.2+ backend reconfigures: Portal follows into configuration and back to play, and a kick there is a configuration Disconnect", { timeout: 30_000 }, async () => {
    const { session, backend, portal } = await startBoth()
    for (const [version, mode] of [["1.20.4", "off"], [NEWEST_VERSION, "on"]] as const) {
      const back = connectClient(portal.port, { version, username: `Back_${mode}`, host: `${mode}.example`, ...(mode === "on" ? { session } : {}) })
      const stay = connectClient(portal.port, { version, username: `Stay_${mode}`, host: `${mode}.example`, ...(mode === "on" ? { session } : {}) })
      expect((await back.joined)._tag).toBe("Joined")
      expect((await stay.joined)._tag).toBe("Joined")
      for (const name of [`Back_${mode}`, `Stay_${mode}`]) {
        const serverSide = backend.clients.get(name)
        const acknowledged = new Promise((resolve) => serverSide.once("configuration_acknowledged", resolve))
        serverSide.write("start_configuration", {})
        await acknowledged
        serverSide.state = "configuration"
      }
      // In configuration: a kick is the configuration state's Disconnect.
      expect(await endSession(portal, `Stay_${mode}`, "kicked while configuring")).toBe(true)
      expect(await stay.ended).toBe("kicked while configuring")
      // Back to play: the player acknowledges, and play packets flow again.
      const serverSide = backend.clients.get(`Back_${mode}`)
      const finished = new Promise((resolve) => serverSide.once("finish_configuration", resolve))
      serverSide.write("finish_configuration", {})
      await finished
      serverSide.state = "play"
      serverChat(serverSide, "back in play")
      await waitFor(() => back.chat.includes("back in play"))
      expect(await endSession(portal, `Back_${mode}`, "kicked in play again")).toBe(true)
      expect(await back.ended).toBe("kicked in play again")
    }
  })

  it("the backend's kick in configuration and in play: the player sees its reason, and the log names it", { timeout: 30_000 }, async () => {
    const { session, backend, portal } = await startBoth()
    for (const [version, mode] of [["1.12.2", "off"], ["1.20.4", "on"], [NEWEST_VERSION, "off"]] as const) {
      const name = `Kicked_${mode}_${version.replace(/\./g, "_")}`.slice(0, 16)
      const player = connectClient(portal.port, { version, username: name, host: `${mode}.example`, ...(mode === "on" ? { session } : {}) })
      expect((await player.joined)._tag).toBe("Joined")
      backend.clients.get(name).end(`kicked in play, ${name}`)
      expect(await player.ended).toBe(`kicked in play, ${name}`)
      await portal.waitForLog(new RegExp(`the backend disconnected the player: kicked in play, ${name}`))
    }
    // In configuration (1.20.2+): the backend reconfigures the player, then refuses it there.
    const name = "Reconfigured"
    const player = connectClient(portal.port, { version: NEWEST_VERSION, username: name, host: "on.example", session })
    expect((await player.joined)._tag).toBe("Joined")
    const serverSide = backend.clients.get(name)
    const acknowledged = new Promise((resolve) => serverSide.once("configuration_acknowledged", resolve))
    serverSide.write("start_configuration", {})
    await acknowledged
    serverSide.state = "configuration"
    serverSide.write("disconnect", { reason: { type: "compound", name: "", value: { text: { type: "string", value: "not while configuring" } } } })
    expect(await player.ended).toBe("not while configuring")
    await portal.waitForLog(/the backend disconnected the player: not while configuring/)
  })

  it("the backend closing in play or refusing to answer: the player is told, in every state", { timeout: 30_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    const backend = await startPacketBackend()
    const closed = net.createServer((socket) => socket.destroy())
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const closedPort = (closed.address() as net.AddressInfo).port
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[forwarding]\nmode = "legacy"\n`, {
      ...servers(backend.port),
      "gone.toml": `domains = ["gone.example"]\naddresses = ["127.0.0.1:1"]\nproxy_mode = "client_only"\ndisconnect_message = "nobody home"`,
      "shut.toml": `domains = ["shut.example"]\naddresses = ["127.0.0.1:${closedPort}"]\nproxy_mode = "offline"`
    })
    const portal = await startPortal(dir.configFile)
    // In play: the backend's connection is cut without a reason.
    const cut = connectClient(portal.port, { version: "1.21.4", username: "Cut", host: "on.example", session })
    expect((await cut.joined)._tag).toBe("Joined")
    backend.clients.get("Cut").socket.destroy()
    expect(await cut.ended).toMatch(/The server closed the connection/)
    // Unreachable: the server's disconnect_message, encrypted for an authenticated player.
    const away = connectClient(portal.port, { version: "1.20.4", username: "Away", host: "gone.example", session })
    expect(await away.joined).toEqual({ _tag: "Kicked", reason: "nobody home" })
    // Closed during the login: told so.
    const shut = connectClient(portal.port, { version: "1.12.2", username: "Shut", host: "shut.example" })
    expect(await shut.joined).toEqual({ _tag: "Kicked", reason: expect.stringMatching(/The server closed the connection/) })
    await portal.waitForLog(/the backend closed the connection during the login/)
    closed.close()
  })

  it("a client version the packet table does not know is told the supported range; a raw mode lets it through", async () => {
    const backend = await startPacketBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n`, {
      ...servers(backend.port),
      "raw.toml": `domains = ["raw.example"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    const { encodeHandshake } = await import("../../src/protocol/handshake.js")
    const attempt = (host: string, protocolVersion = 9999) =>
      new Promise<Buffer>((resolve) => {
        const socket = net.connect(portal.port, "127.0.0.1")
        const chunks: Array<Buffer> = []
        socket.on("data", (chunk) => chunks.push(chunk))
        socket.on("error", () => {})
        socket.on("close", () => resolve(Buffer.concat(chunks)))
        socket.write(encodeHandshake({ protocolVersion, address: host, port: 25565, nextState: 2 }))
        // Login Start of the versions before 1.19: the name alone.
        socket.write(Buffer.from([0x07, 0x00, 0x05, ...Buffer.from("Alice")]))
        setTimeout(() => socket.destroy(), 2000)
      })
    const refused = (await attempt("off.example")).toString("utf8")
    expect(refused).toContain(`supports Minecraft ${supportedRangeText()}`)
    await portal.waitForLog(/protocol version 9999 is not supported by the packet modes/)
    // 1.9.1 and 1.14.2 lie inside that range (minecraft-data has no definition of their own): they are let in.
    for (const protocolVersion of [108, 485]) {
      expect((await attempt("off.example", protocolVersion)).toString("utf8")).not.toContain("supports Minecraft")
      expect(backend.handshakes.map((entry) => entry.protocolVersion)).toContain(protocolVersion)
    }
    // A raw mode does not look at versions: the connection is relayed (and the backend, not Portal, decides).
    expect((await attempt("raw.example")).toString("utf8")).not.toContain("supports Minecraft")
    expect(portal.logs.filter((line) => line.includes("is not supported by the packet modes"))).toHaveLength(1)
  })
})
