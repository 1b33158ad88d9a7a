/**
 * TCP_NODELAY and the `[keepalive]` settings on both of Portal's sockets for a player, as the kernel holds them: the
 * player's side gets them from the listening socket, the backend's side one by one.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { loadNativeAddon, type NativeAddon } from "../../src/services/native/addon.js"
import { keepaliveSupport } from "../../src/services/native/keepalive.js"
import { ownTcpSockets } from "../helpers/net.js"
import { startPortal } from "../helpers/portal.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { join, startBackend } from "../peers/minecraft.js"

const support = keepaliveSupport()
const loaded = loadNativeAddon()

// One thread: the test reads the socket options of the sockets this process accepted.
const proxyToml = (keepalive: string) => `bind = "127.0.0.1:0"\nworker_threads = 1\n[keepalive]\n${keepalive}`

describe.skipIf(!support.full)(support.full ? "socket options" : `socket options (skipped: ${support.reason})`, () => {
  const addon = (loaded as { addon: NativeAddon }).addon

  /** A player held by the backend, and Portal's two sockets for the players joined so far. */
  const setup = async (keepalive: string) => {
    const backend = await startBackend("main", { hold: true })
    const dir = makeConfigDir(proxyToml(keepalive), {
      "main.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    const sockets = () => {
      const own = ownTcpSockets()
      const connected = own.filter((socket) => socket.state === "established")
      return {
        listening: own.filter((socket) => socket.state === "listen" && socket.localPort === portal.port).map((s) => s.fd),
        players: connected.filter((socket) => socket.localPort === portal.port).map((s) => s.fd),
        backends: connected.filter((socket) => socket.remotePort === backend.port).map((s) => s.fd)
      }
    }
    return { backend, dir, portal, sockets }
  }

  it("sets TCP_NODELAY and every keepalive parameter on both sockets, and follows a reload for new players", async () => {
    const { dir, portal, sockets } = await setup(`time = "45s"\ninterval = "7s"\nretries = 4`)
    expect(await join(portal.port, "mc.example.com", { username: "First" })).toMatchObject({ _tag: "Joined" })
    const first = sockets()
    expect(first.players).toHaveLength(1)
    expect(first.backends).toHaveLength(1)
    const configured = { enabled: true, idle: 45, interval: 7, count: 4, noDelay: true }
    expect(addon.getKeepAliveDiagnostic(first.players[0]!)).toEqual(configured)
    expect(addon.getKeepAliveDiagnostic(first.backends[0]!)).toEqual(configured)
    // Set once where players connect: the listening socket holds them, and each player's socket inherits them.
    expect(first.listening).toHaveLength(1)
    expect(addon.getKeepAliveDiagnostic(first.listening[0]!)).toEqual(configured)

    dir.write("proxy.toml", proxyToml(`time = "60s"\ninterval = "5s"\nretries = 2`))
    await portal.run(Effect.flatMap(ConfigStore, (store) => store.reloadGlobal))
    expect(await join(portal.port, "mc.example.com", { username: "Second" })).toMatchObject({ _tag: "Joined" })
    const after = sockets()
    const newPlayer = after.players.filter((fd) => !first.players.includes(fd))
    const newBackend = after.backends.filter((fd) => !first.backends.includes(fd))
    expect(newPlayer).toHaveLength(1)
    expect(newBackend).toHaveLength(1)
    const reloaded = { enabled: true, idle: 60, interval: 5, count: 2, noDelay: true }
    expect(addon.getKeepAliveDiagnostic(newPlayer[0]!)).toEqual(reloaded)
    expect(addon.getKeepAliveDiagnostic(newBackend[0]!)).toEqual(reloaded)
    expect(addon.getKeepAliveDiagnostic(after.listening[0]!)).toEqual(reloaded)
    // A player already connected keeps what it had.
    expect(addon.getKeepAliveDiagnostic(first.players[0]!)).toEqual(configured)
  })

  it("sets values over the kernel's limits at those limits, the others as configured", async () => {
    // Linux allows at most 127 probes and 32767 s: refused, a count of 200 took the time and interval down with it.
    const { portal, sockets } = await setup(`time = "10h"\ninterval = "7s"\nretries = 200`)
    expect(await join(portal.port, "mc.example.com")).toMatchObject({ _tag: "Joined" })
    const { players, backends, listening } = sockets()
    expect(players).toHaveLength(1)
    const clamped = { enabled: true, idle: 32767, interval: 7, count: 127, noDelay: true }
    expect(addon.getKeepAliveDiagnostic(listening[0]!)).toEqual(clamped)
    expect(addon.getKeepAliveDiagnostic(players[0]!)).toEqual(clamped)
    expect(addon.getKeepAliveDiagnostic(backends[0]!)).toEqual(clamped)
  })
})
