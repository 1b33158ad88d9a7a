/**
 * Real protocol peers from the `minecraft-protocol` package: backend servers and clients on loopback.
 * Nothing here is Portal's code, so every end-to-end test checks Portal against an independent implementation.
 */
import { createRequire } from "node:module"
import * as net from "node:net"
import { afterEach } from "vitest"

const require = createRequire(import.meta.url)
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const mc: any = require("minecraft-protocol")

export const CLIENT_VERSIONS = ["1.8.8", "1.12.2", "1.20.4", "26.1"] as const
export type ClientVersion = (typeof CLIENT_VERSIONS)[number] | string

export interface BackendPeer {
  readonly name: string
  readonly port: number
  /** Handshakes the backend received: the address and port fields as sent to it. */
  readonly handshakes: Array<{ readonly host: string; readonly port: number; readonly protocolVersion: number }>
  /** Players currently connected (the backend keeps them when `hold` is true). */
  readonly players: Set<unknown>
  logins: number
  close(): Promise<void>
}

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {})
})

/**
 * A backend that answers pings with `motd` and, on login, kicks the player with `kick: <name>` or, with
 * `hold`, keeps them connected until the test ends.
 */
/** `motdPerHost`: the MOTD names the host the ping asked for (as a backend behind forced hosts answers). */
export const startBackend = async (name: string, options: { hold?: boolean; port?: number; motdPerHost?: boolean } = {}): Promise<BackendPeer> => {
  const perHost =
    options.motdPerHost === true
      ? {
          beforePing: (response: { description: unknown }, client: { serverHost?: string }) => ({
            ...response,
            description: { text: `motd of ${name} for ${(client.serverHost ?? "").split("\0")[0]}` }
          })
        }
      : {}
  const server = mc.createServer({
    ...perHost,
    "online-mode": false,
    host: "127.0.0.1",
    port: options.port ?? 0,
    version: false,
    motd: `motd of ${name}`,
    maxPlayers: 42,
    keepAlive: false,
    hideErrors: true
  })
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve)
    server.once("error", reject)
  })
  const peer: BackendPeer = {
    name,
    port: (server.socketServer.address() as net.AddressInfo).port,
    handshakes: [],
    players: new Set(),
    logins: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of Object.values(server.clients) as Array<{ end(reason: string): void }>) client.end("backend closing")
        server.socketServer.close(() => resolve())
        setTimeout(resolve, 500)
      })
  }
  server.on("connection", (client: { once(event: string, listener: (packet: { serverHost: string; serverPort: number; protocolVersion: number }) => void): void }) => {
    client.once("set_protocol", (packet) => {
      peer.handshakes.push({ host: packet.serverHost, port: packet.serverPort, protocolVersion: packet.protocolVersion })
    })
  })
  server.on("playerJoin", (client: {
    protocolVersion: number
    end(reason: string): void
    on(event: string, listener: () => void): void
    write(name: string, params: Record<string, unknown>): void
  }) => {
    peer.logins += 1
    if (options.hold === true) {
      peer.players.add(client)
      client.on("end", () => peer.players.delete(client))
      // A packet every version has in play state tells the client it is in (keep_alive's id is a VarInt before 1.12.2).
      client.write("keep_alive", { keepAliveId: client.protocolVersion >= 340 ? [0, 1] : 1 })
    } else {
      client.end(`kick: ${name}`)
    }
  })
  cleanups.push(() => peer.close())
  return peer
}

const connectVia = (port: number, preamble?: Buffer, address = "127.0.0.1", localAddress?: string) => (client: { setSocket(socket: net.Socket): void; emit(event: string): void }) => {
  const socket = net.connect(localAddress === undefined ? { port, host: address } : { port, host: address, localAddress })
  if (preamble !== undefined) socket.write(preamble)
  client.setSocket(socket)
}

export interface PingResult {
  readonly description: unknown
  readonly players?: { max: number; online: number }
  readonly version?: { name: string; protocol: number }
  readonly favicon?: string
  readonly [key: string]: unknown
}

/**
 * A server-list ping through Portal with `host` in the handshake; `address`: Portal's address to connect to,
 * `localAddress`: the one to connect from.
 */
export const ping = (
  portalPort: number,
  host: string,
  version: ClientVersion = "1.20.4",
  preamble?: Buffer,
  address = "127.0.0.1",
  localAddress?: string
): Promise<PingResult> =>
  mc.ping({ host, port: 25565, version, connect: connectVia(portalPort, preamble, address, localAddress), closeTimeout: 8000, noPongTimeout: 2000 })

export type JoinResult =
  | { readonly _tag: "Kicked"; readonly reason: string }
  | { readonly _tag: "Joined"; readonly leave: () => void }
  | { readonly _tag: "Closed" }

/** Flattens a kick reason (JSON text, NBT component or plain string) into its text. */
export const reasonText = (reason: unknown): string => {
  if (typeof reason === "string") {
    try {
      return reasonText(JSON.parse(reason))
    } catch {
      return reason
    }
  }
  if (reason !== null && typeof reason === "object") {
    const node = reason as { text?: unknown; value?: unknown; extra?: unknown; translate?: unknown; type?: string }
    if (node.type === "compound" || node.type === "string") return reasonText(node.value)
    let out = typeof node.text === "string" ? node.text : reasonText(node.text ?? "")
    if (typeof node.translate === "string") out += node.translate
    if (Array.isArray(node.extra)) for (const child of node.extra) out += reasonText(child)
    return out
  }
  return ""
}

/**
 * Joins through Portal as `username` (offline mode) with `host` in the handshake. `Joined` means the backend let
 * the player into the play state (a backend started with `hold` says so with a keep-alive).
 */
export const join = (
  portalPort: number,
  host: string,
  options: {
    version?: ClientVersion
    username?: string
    preamble?: Buffer
    timeoutMs?: number
    /** The proxy's address to connect to, and the local address to connect from. */
    address?: string
    localAddress?: string
  } = {}
): Promise<JoinResult> =>
  new Promise((resolve, reject) => {
    const client = mc.createClient({
      host: "127.0.0.1",
      port: portalPort,
      fakeHost: host,
      username: options.username ?? "Steve",
      auth: "offline",
      version: options.version ?? "1.20.4",
      connect: connectVia(portalPort, options.preamble, options.address, options.localAddress),
      hideErrors: true,
      keepAlive: false
    })
    let settled = false
    const settle = (result: JoinResult) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(result)
    }
    const timer = setTimeout(() => {
      client.end()
      reject(new Error(`join via ${host} did not finish in time`))
    }, options.timeoutMs ?? 10_000)
    client.on("kick_disconnect", (packet: { reason: unknown }) => settle({ _tag: "Kicked", reason: reasonText(packet.reason) }))
    client.on("disconnect", (packet: { reason: unknown }) => settle({ _tag: "Kicked", reason: reasonText(packet.reason) }))
    client.on("keep_alive", () => {
      const leave = () => client.end()
      cleanups.push(async () => leave())
      settle({ _tag: "Joined", leave })
    })
    client.on("error", () => {})
    client.on("end", () => settle({ _tag: "Closed" }))
  })
