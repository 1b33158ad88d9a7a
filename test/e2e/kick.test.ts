/**
 * Ending a live session from outside (what a kick from the admin API and a ban of an online player do): through the
 * player registry, in both raw relay modes, with a real client. While the backend has sent the player nothing the
 * player is told why; after that the connection is closed. A client_only login ended while the session service is
 * asked is told in its cipher, and its place freed at once.
 */
import { Effect } from "effect"
import { createRequire } from "node:module"
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { waitFor } from "../helpers/wait.js"
import { reasonText, startBackend } from "../peers/minecraft.js"
import { connectClient } from "../peers/packetPeers.js"
import { startSessionService } from "../peers/sessionService.js"

const require = createRequire(import.meta.url)
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const mc: any = require("minecraft-protocol")

interface Watched {
  readonly events: Array<string>
  end(): void
}

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

/** A real 1.20.4 client joining through Portal; records what it sees: play, a disconnect reason, the end. */
const watchJoin = (portalPort: number, host: string): Watched => {
  const events: Array<string> = []
  const client = mc.createClient({
    host: "127.0.0.1",
    port: portalPort,
    fakeHost: host,
    username: "Alex",
    auth: "offline",
    version: "1.20.4",
    hideErrors: true,
    keepAlive: false
  })
  client.on("keep_alive", () => events.push("play"))
  client.on("disconnect", (packet: { reason: unknown }) => events.push(`disconnect: ${reasonText(packet.reason)}`))
  client.on("kick_disconnect", (packet: { reason: unknown }) => events.push(`disconnect: ${reasonText(packet.reason)}`))
  client.on("error", () => {})
  client.on("end", () => events.push("end"))
  const end = () => client.end()
  cleanups.push(end)
  return { events, end }
}

/** A backend that accepts connections and never answers: the player stays in the login state. */
const silentBackend = async () => {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("error", () => {})
    // Reads (and drops) what arrives, so that Portal's close is seen.
    socket.resume()
    socket.on("close", () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  cleanups.push(() => {
    for (const socket of sockets) socket.destroy()
    server.close()
  })
  return { port: (server.address() as net.AddressInfo).port, sockets }
}

const sessions = (portal: Awaited<ReturnType<typeof startPortal>>) => portal.run(Effect.flatMap(PlayerRegistry, (registry) => registry.list))

describe.each(["passthrough", "zero_copy"])("ending a live session (%s)", (mode) => {
  it("a player in play is disconnected from the registry, and leaves it", async () => {
    const backend = await startBackend("kick", { hold: true })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, {
      "main.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "${mode}"`
    })
    const portal = await startPortal(dir.configFile)
    const player = watchJoin(portal.port, "mc.example.com")
    await waitFor(() => player.events.includes("play"), { what: "the player in play" })
    const [session] = await sessions(portal)
    expect(session).toMatchObject({ name: "Alex", serverId: "main" })
    expect(await portal.run(Effect.flatMap(PlayerRegistry, (registry) => registry.end(session!.id, "Kicked by an operator")))).toBe(true)
    await waitFor(() => player.events.includes("end"), { what: "the player's connection to end" })
    // The backend had spoken (the connection may be encrypted or compressed): a close, no message.
    expect(player.events.filter((event) => event.startsWith("disconnect"))).toEqual([])
    await waitFor(async () => (await sessions(portal)).length === 0, { what: "the registry to let the session go" })
    await portal.waitForLog(/Alex .*left main after .* \(ended: Kicked by an operator;/)
    await waitFor(() => backend.players.size === 0, { what: "the backend to see the player leave" })
  })

  it("a player still in the login state is told the reason", async () => {
    const backend = await silentBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, {
      "main.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "${mode}"`
    })
    const portal = await startPortal(dir.configFile)
    const player = watchJoin(portal.port, "mc.example.com")
    await waitFor(() => backend.sockets.size === 1, { what: "the backend connection" })
    await portal.waitForLog(/Alex .*joined main via/)
    const ended = await portal.run(
      Effect.flatMap(PlayerRegistry, (registry) => registry.endWhere((session) => session.name === "Alex", "§cYou were banned: griefing"))
    )
    expect(ended).toBe(1)
    await waitFor(() => player.events.includes("end"), { what: "the player's connection to end" })
    expect(player.events).toContain("disconnect: §cYou were banned: griefing")
    await waitFor(() => backend.sockets.size === 0, { what: "the backend connection to close" })
    await waitFor(async () => (await sessions(portal)).length === 0, { what: "the registry to let the session go" })
  })
})

describe.each([1, 2])("ending a client_only login while the session service is asked (worker_threads = %i)", (threads) => {
  it("the player is told at once, and the session ends then: its place is free, and no failure of the service is logged", { timeout: 20_000 }, async () => {
    const session = await startSessionService()
    process.env.PORTAL_SESSION_SERVER = session.url
    session.mode = "hang"
    const backend = await silentBackend()
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = ${threads}\n[forwarding]\nmode = "legacy"`, {
      "on.toml": `domains = ["on.example"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "client_only"\nmax_players = 1`
    })
    const portal = await startPortal(dir.configFile)
    const player = connectClient(portal.port, { version: "1.20.4", username: "Waiting", host: "on.example", session })
    await waitFor(() => session.asked.length === 1 || undefined, { what: "the session service to be asked" })
    await waitFor(async () => (await sessions(portal)).length === 1, { what: "the login listed" })
    const ended = await portal.run(Effect.flatMap(PlayerRegistry, (registry) => registry.endWhere(() => true, "Take a break")))
    expect(ended).toBe(1)
    expect(await player.joined).toEqual({ _tag: "Kicked", reason: "Take a break" })
    // Well before the service's 5-second bound: the login is over, and the server's one place free again.
    await waitFor(async () => (await sessions(portal)).length === 0, { what: "the registry to let the session go", timeoutMs: 1500 })
    await new Promise((resolve) => setTimeout(resolve, 5500))
    expect(portal.logs.filter((line) => /could not authenticate Waiting/.test(line))).toEqual([])
  })
})
