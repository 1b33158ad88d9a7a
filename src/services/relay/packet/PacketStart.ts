/**
 * What the join phase hands a packet relay mode (offline, client_only) besides the two sockets: who the player is,
 * what the backend must be sent first, the player's encryption (client_only), and how the backend learns the player
 * (forwarding, the BungeeCord channel). Plain data and synchronous functions: the relay runs on callbacks.
 */
import type { GameProfileProperty } from "../../../protocol/forwarding.js"
import type { PlayerPublicKey } from "../../../protocol/login.js"
import type { StreamCipher } from "../../../protocol/cipher.js"
import type { BungeeSubchannel } from "../../../protocol/bungeeChannel.js"

/** The player as the backend is told: after authentication in client_only, as Login Start said in offline. */
export interface PacketLogin {
  readonly name: string
  /** Dashed. */
  readonly uuid: string
  /** The profile's properties (the skin's `textures`); empty in offline. */
  readonly properties: ReadonlyArray<GameProfileProperty>
  readonly protocolVersion: number
  readonly clientIp: string
  readonly clientPort: number
  /** The chat key of a 1.19-1.19.2 Login Start, for modern forwarding v2/v3. */
  readonly publicKey?: PlayerPublicKey | undefined
}

/** Lines about one player's session, with the connection's fields (written outside any fiber). */
export interface PacketLog {
  readonly debug: (message: string) => void
  readonly info: (message: string) => void
  readonly warning: (message: string) => void
}

/** A server as the BungeeCord channel reports it. */
export interface ChannelServer {
  readonly id: string
  readonly host: string
  readonly port: number
}

/** A live session as the BungeeCord channel reads it (the PlayerRegistry's entries have this shape). */
export interface ChannelSession {
  readonly serverId: string
  readonly clientAddress: string
  readonly clientPort: number
  readonly name: string | undefined
  /** Dashed. */
  readonly uuid: string | undefined
}

/** What the BungeeCord channel reads (legacy_channel = true). */
export interface ChannelContext {
  readonly permissions: Readonly<Record<BungeeSubchannel, boolean>>
  /** Live sessions, all or of one server (the registry's data plane). */
  readonly sessions: (serverId?: string) => ReadonlyArray<ChannelSession>
  /** Players on one server (the registry's data plane). */
  readonly countFor: (serverId: string) => number
  /** The servers as configured when the player joined. */
  readonly servers: ReadonlyArray<ChannelServer>
}

export interface PacketStart {
  readonly serverId: string
  readonly login: PacketLogin
  /** The first bytes for the backend: the PROXY header (send_proxy_protocol) and the handshake (with forwarding). */
  readonly preface: Buffer
  /** What the player sent beyond what the session phases read (still encrypted in client_only). */
  readonly buffered: Buffer
  /** client_only: the ciphers of the player's connection, whose state continues from the authentication. */
  readonly encryption?: { readonly encrypt: StreamCipher; readonly decrypt: StreamCipher } | undefined
  /** The forwarding secret when the server uses modern forwarding. */
  readonly modernSecret?: string | undefined
  /** The BungeeCord channel, when legacy_channel is on. */
  readonly channel?: ChannelContext | undefined
  /** What the player is told when the backend closes the connection without a reason. */
  readonly backendClosedMessage: string
  readonly log: PacketLog
}
