/**
 * What the join phase hands a packet relay mode (offline, client_only) besides the two sockets: who the player is,
 * what the backend must be sent first, the player's encryption (client_only), and how the backend learns the player
 * (forwarding, the BungeeCord channel). Plain data and synchronous functions: the relay runs on callbacks.
 */
import type { GameProfileProperty } from "../../../protocol/forwarding.js"
import type { PlayerPublicKey } from "../../../protocol/login.js"
import type { StreamCipher } from "../../../protocol/cipher.js"
import type { BungeeSubchannel } from "../../../protocol/bungeeChannel.js"
import type { TextComponent } from "../../../protocol/text.js"

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
  /**
   * Whose key it is: the UUID that Login Start carried, when it carried one (modern forwarding v3; the backend's Login
   * Start carries a 1.19.1+ key only when this is the player's `uuid`).
   */
  readonly keyHolder?: string | undefined
  /** What followed the host in the player's handshake address (a Forge client's marker), for modern forwarding. */
  readonly addressSuffix: string
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

/** Which live sessions a BungeeCord lookup needs (IPOther, UUIDOther, GetPlayerServer; PlayerList). */
export type ChannelQuery =
  /** The session of one player, by name in any case: the first one listed. */
  | { readonly _tag: "Named"; readonly name: string }
  /** The sessions on one server, or (undefined) on all. */
  | { readonly _tag: "On"; readonly serverId: string | undefined }

/**
 * What the BungeeCord channel delivers to other players (Forward, ForwardToPlayer, Message, MessageRaw, KickPlayer,
 * KickPlayerRaw), as one thread hands it to another through the main thread: plain structured-cloneable data.
 */
export type ChannelDelivery =
  /**
   * A forwarded payload (already in the form BungeeCord forwards) for one player's backend on `server`, or
   * (undefined) on every server that has a player; servers in `skip` are not (any more) wanted.
   */
  | { readonly _tag: "Forward"; readonly server: string | undefined; readonly skip: ReadonlyArray<string>; readonly data: Uint8Array }
  /** A forwarded payload for the backend of the player so named. */
  | { readonly _tag: "ForwardToPlayer"; readonly player: string; readonly data: Uint8Array }
  /** A chat message to the player so named, or (undefined) to every player. */
  | { readonly _tag: "Message"; readonly player: string | undefined; readonly message: TextComponent }
  /** The player so named disconnected with `reason` (KickPlayerRaw's text as the plugin wrote it). */
  | { readonly _tag: "Kick"; readonly player: string; readonly reason: TextComponent }

/**
 * How the channel reaches beyond the thread that relays the asking player. On one thread every session is here: a
 * lookup replies at once and every delivery is local (`route` is undefined). With worker threads a lookup asks the
 * main thread, whose registry lists every worker's sessions, and replies later; a delivery for players this thread
 * does not relay goes to the main thread, which passes it on to the workers that relay them.
 */
export interface ChannelNetwork {
  /** Replies with the live sessions proxy-wide that `query` selects; with none and a reason when it could not ask. */
  readonly lookup: (query: ChannelQuery, reply: (sessions: ReadonlyArray<ChannelSession>, failure?: string) => void) => void
  /** Sends on what this thread could not deliver itself (with worker threads). */
  readonly route: ((delivery: ChannelDelivery) => void) | undefined
  /** True the first time, proxy-wide, that a backend asks for `request` (logged once, however many threads see it). */
  readonly firstTime: (request: OnceRequest) => boolean
}

/** The requests the channel logs once rather than answering (they need server switching). */
export const ONCE_REQUESTS = ["Connect", "ConnectOther"] as const
export type OnceRequest = (typeof ONCE_REQUESTS)[number]

/** What the BungeeCord channel reads (legacy_channel = true). */
export interface ChannelContext extends ChannelNetwork {
  readonly permissions: Readonly<Record<BungeeSubchannel, boolean>>
  /** Players on one server, proxy-wide (the registry's data plane; the counts are shared by every thread). */
  readonly countFor: (serverId: string) => number
  /** The servers as configured when the player joined. */
  readonly servers: ReadonlyArray<ChannelServer>
  /** A host name's address (ServerIP answers an IP, as BungeeCord does); undefined and why when it does not resolve. */
  readonly resolve: (host: string, reply: (address: string | undefined, failure?: string) => void) => void
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
