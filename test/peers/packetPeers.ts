/**
 * minecraft-protocol peers for the packet modes: a backend that compresses (threshold 256), keeps players in play,
 * sends them chat and keep-alives and counts what they send; clients in offline and online mode (against the fake
 * session service) that chat back.
 */
import { createRequire } from "node:module"
import * as net from "node:net"
import { afterEach } from "vitest"
import { reasonText } from "./minecraft.js"
import type { SessionService } from "./sessionService.js"

const require = createRequire(import.meta.url)
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const mc: any = require("minecraft-protocol")

/** The newest version minecraft-protocol speaks. */
export const NEWEST_VERSION: string = mc.supportedVersions[mc.supportedVersions.length - 1]

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await Promise.resolve(cleanup()).catch(() => {})
})

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type McClient = any

/** A system chat line from the server, in the packet each version has. */
export const serverChat = (client: McClient, text: string): void => {
  const pv: number = client.protocolVersion
  const json = JSON.stringify({ text })
  if (pv >= 765) client.write("system_chat", { content: { type: "compound", name: "", value: { text: { type: "string", value: text } } }, isActionBar: false })
  else if (pv >= 760) client.write("system_chat", { content: json, isActionBar: false })
  else if (pv >= 759) client.write("system_chat", { content: json, type: 1 })
  else if (pv >= 735) client.write("chat", { message: json, position: 1, sender: "00000000-0000-0000-0000-000000000000" })
  else client.write("chat", { message: json, position: 1 })
}

/** The text of a chat packet the client received (any version's form). */
const chatText = (packet: { content?: unknown; message?: unknown; formattedMessage?: unknown; plainMessage?: unknown }): string =>
  reasonText(packet.content ?? packet.message ?? packet.formattedMessage ?? packet.plainMessage ?? "")

export interface PlayerOnBackend {
  readonly name: string
  readonly protocolVersion: number
  /** Chat lines the player sent. */
  readonly chat: Array<string>
  keepAlives: number
}

/** A Login Start as the backend read it; `key` is a 1.19-1.19.2 chat key, `uuid` the UUID field where the version has one. */
export interface LoginStartSeen {
  readonly name: string
  readonly uuid: string | undefined
  readonly key: { readonly timestamp: bigint; readonly publicKey: Buffer; readonly signature: Buffer } | undefined
}

export interface PacketBackend {
  readonly port: number
  /** Handshakes as the backend received them (address with forwarding payload). */
  readonly handshakes: Array<{ host: string; protocolVersion: number }>
  /** Login Starts as the backend received them. */
  readonly loginStarts: Array<LoginStartSeen>
  readonly players: Map<string, PlayerOnBackend>
  /** Server-side clients by name, for tests that make the backend do something. */
  readonly clients: Map<string, McClient>
  close(): Promise<void>
}

/**
 * A backend in offline mode with compression (a threshold of 256 unless given; a negative one: no Set Compression);
 * every second it sends each player a chat line.
 */
export const startPacketBackend = async (options: { compressionThreshold?: number } = {}): Promise<PacketBackend> => {
  const threshold = options.compressionThreshold ?? 256
  const server = mc.createServer({
    "online-mode": false,
    host: "127.0.0.1",
    port: 0,
    version: false,
    keepAlive: true,
    hideErrors: true,
    motd: "packet backend",
    // minecraft-protocol's server always sends Set Compression 256 whatever it is given: its login is made to send
    // the threshold asked for here instead, and to compress with it.
    beforeLogin: (client: McClient) => {
      const write = client.write.bind(client)
      client.write = (name: string, params: unknown) => {
        if (name !== "compress") return write(name, params)
        if (threshold >= 0) write(name, { threshold })
      }
      const setThreshold = client.setCompressionThreshold.bind(client)
      client.setCompressionThreshold = () => {
        if (threshold >= 0) setThreshold(threshold)
      }
    }
  })
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve)
    server.once("error", reject)
  })
  const backend: PacketBackend = {
    port: (server.socketServer.address() as net.AddressInfo).port,
    handshakes: [],
    loginStarts: [],
    players: new Map(),
    clients: new Map(),
    close: () =>
      new Promise<void>((resolve) => {
        clearInterval(ticker)
        for (const client of Object.values(server.clients) as Array<McClient>) client.end("backend closing")
        server.socketServer.close(() => resolve())
        setTimeout(resolve, 500)
      })
  }
  server.on("connection", (client: McClient) => {
    client.once("set_protocol", (packet: { serverHost: string; protocolVersion: number }) => {
      backend.handshakes.push({ host: packet.serverHost, protocolVersion: packet.protocolVersion })
    })
    // Login Start is noted first; a chat key is then taken off it, since minecraft-protocol's server checks a key
    // against Mojang's signature, which no test key has.
    const login = client.listeners("login_start") as Array<(packet: unknown) => void>
    client.removeAllListeners("login_start")
    type Key = { timestamp: [number, number]; publicKey: Buffer; signature: Buffer }
    client.once("login_start", (packet: { username: string; playerUUID?: string; signature?: Key | null }) => {
      const key = packet.signature ?? undefined
      backend.loginStarts.push({
        name: packet.username,
        uuid: packet.playerUUID ?? undefined,
        // minecraft-protocol reads an i64 as [high, low].
        key: key === undefined ? undefined : { ...key, timestamp: (BigInt(key.timestamp[0]) << 32n) | BigInt(key.timestamp[1] >>> 0) }
      })
      for (const listener of login) listener({ ...packet, signature: undefined })
    })
  })
  server.on("playerJoin", (client: McClient) => {
    const player: PlayerOnBackend = { name: client.username, protocolVersion: client.protocolVersion, chat: [], keepAlives: 0 }
    backend.players.set(client.username, player)
    backend.clients.set(client.username, client)
    client.on("chat", (packet: { message: string }) => player.chat.push(packet.message))
    client.on("chat_message", (packet: { message: string }) => player.chat.push(packet.message))
    client.on("keep_alive", () => (player.keepAlives += 1))
    client.on("end", () => backend.clients.delete(client.username))
    serverChat(client, `welcome ${client.username}`)
  })
  let round = 0
  const ticker = setInterval(() => {
    round += 1
    // Only to players in play: a chat packet has no id in the configuration state, and a tick that fell while a test
    // reconfigured a player wrote a packet the client could not read.
    for (const client of backend.clients.values()) if (client.state === "play") serverChat(client, `tick ${round}`)
  }, 1000)
  cleanups.push(() => backend.close())
  return backend
}

export interface PacketClient {
  readonly version: string
  /** Chat lines received from the server. */
  readonly chat: Array<string>
  keepAlives: number
  /** Resolves when the client is in play (its first chat line arrived), or with the kick reason. */
  readonly joined: Promise<{ readonly _tag: "Joined" } | { readonly _tag: "Kicked"; readonly reason: string } | { readonly _tag: "Closed"; readonly error?: string }>
  /** Resolves with the reason of any later disconnect. */
  readonly ended: Promise<string>
  say(text: string): void
  leave(): void
  readonly raw: McClient
}

export interface ClientOptions {
  readonly version: string
  readonly username: string
  /** The address in the handshake. */
  readonly host: string
  /** Online mode against this fake session service (the account is made there). */
  readonly session?: SessionService
  /** The loopback address to connect from (many clients at once from one address meet the handshake bound). */
  readonly localAddress?: string
}

/** A client through Portal at `port`. */
export const connectClient = (port: number, options: ClientOptions): PacketClient => {
  const account = options.session?.account(options.username)
  const client = mc.createClient({
    host: "127.0.0.1",
    port,
    fakeHost: options.host,
    username: options.username,
    version: options.version,
    hideErrors: true,
    keepAlive: true,
    connect: (self: McClient) =>
      self.setSocket(net.connect(options.localAddress === undefined ? { port, host: "127.0.0.1" } : { port, host: "127.0.0.1", localAddress: options.localAddress })),
    ...(account === undefined
      ? { auth: "offline" }
      : {
          sessionServer: options.session!.url,
          // An online-mode login with a made-up account: the fake session service knows its token.
          auth: (self: McClient, clientOptions: Record<string, unknown>) => {
            self.username = account.name
            self.session = { accessToken: account.accessToken, selectedProfile: { id: account.id, name: account.name } }
            self.uuid = account.id.replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, "$1-$2-$3-$4-$5")
            clientOptions.accessToken = account.accessToken
            clientOptions.haveCredentials = true
            ;(clientOptions.connect as (client: McClient) => void)(self)
          }
        })
  })
  let settle: (value: Awaited<PacketClient["joined"]>) => void = () => {}
  let endWith: (reason: string) => void = () => {}
  let inPlay = false
  const joined = new Promise<Awaited<PacketClient["joined"]>>((resolve) => (settle = resolve))
  const ended = new Promise<string>((resolve) => (endWith = resolve))
  const chat: Array<string> = []
  const state: PacketClient = {
    version: options.version,
    chat,
    keepAlives: 0,
    joined,
    ended,
    say: (text) => {
      if (typeof client.chat === "function") client.chat(text)
      else client.write("chat", { message: text })
    },
    leave: () => client.end(),
    raw: client
  }
  const onChat = (packet: Parameters<typeof chatText>[0]) => {
    chat.push(chatText(packet))
    if (!inPlay) {
      inPlay = true
      settle({ _tag: "Joined" })
    }
  }
  client.on("system_chat", onChat)
  client.on("chat", onChat)
  client.on("profileless_chat", onChat)
  client.on("keep_alive", () => (state.keepAlives += 1))
  const onKick = (packet: { reason: unknown }) => {
    const reason = reasonText(packet.reason)
    settle({ _tag: "Kicked", reason })
    endWith(reason)
  }
  client.on("kick_disconnect", onKick)
  client.on("disconnect", onKick)
  let lastError: string | undefined
  client.on("error", (error: Error) => (lastError = error.message))
  client.on("end", () => {
    settle(lastError === undefined ? { _tag: "Closed" } : { _tag: "Closed", error: lastError })
    endWith("(closed)")
  })
  cleanups.push(() => client.end())
  return state
}
