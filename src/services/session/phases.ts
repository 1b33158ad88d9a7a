/**
 * The values that pass from one session phase to the next. Each phase takes what the previous one produced and
 * returns what the next needs (or `undefined` when it answered or refused the connection itself, and closed it).
 * They are immutable: whatever later hooks in between phases (plugins) sees a value, not a shared record.
 */
import type { ServerDefinition } from "../../schema/decode.js"
import type { Handshake } from "../../protocol/handshake.js"
import type { LegacyPing } from "../../protocol/legacy.js"
import type { LoginStart } from "../../protocol/login.js"
import type { StreamCipher } from "../../protocol/cipher.js"
import type { GameProfileProperty } from "../../protocol/forwarding.js"
import type { ConfigSnapshot } from "../ConfigStore.js"
import type { SocketReader } from "../net/SocketReader.js"
import type { SessionLease } from "../PlayerRegistry.js"
import type { Connection, Peer, Release } from "./connection.js"

/** What the first bytes of a connection were. */
export type SettledOpening =
  | { readonly _tag: "Modern"; readonly handshake: Handshake; /** The frame as the client sent it. */ readonly raw: Buffer }
  | { readonly _tag: "LegacyPing"; readonly ping: LegacyPing }
  | { readonly _tag: "LegacyLogin" }

/** The opening phase's result: a connection past its PROXY header and handshake (or legacy ping). */
export interface Opened {
  readonly connection: Connection
  readonly reader: SocketReader
  readonly peer: Peer
  /** The configuration as it was when the connection arrived; the whole setup uses this one. */
  readonly snapshot: ConfigSnapshot
  /** The connection's handshake slot (the flood bound): given back once Login Start is read, or at the end. */
  readonly slot: Release
  readonly opening: Exclude<SettledOpening, { readonly _tag: "LegacyLogin" }>
}

export type ModernOpened = Opened & { readonly opening: Extract<SettledOpening, { readonly _tag: "Modern" }> }

export type LegacyOpened = Opened & { readonly opening: Extract<SettledOpening, { readonly _tag: "LegacyPing" }> }

/** The routing phase's result for a legacy ping: the server a 1.6 ping's host names, or none (older pings name none). */
export interface LegacyRoute {
  readonly opened: LegacyOpened
  /** The host the ping names ("" before 1.6). */
  readonly host: string
  readonly server: ServerDefinition | undefined
}

/** The routing phase's result for a status ping: the server it names, or none (an unknown domain shown a MOTD). */
export interface StatusRoute {
  readonly _tag: "Status"
  readonly opened: ModernOpened
  readonly server: ServerDefinition | undefined
}

/** The routing phase's result for a login: the server it is for. */
export interface LoginRoute {
  readonly _tag: "Login"
  readonly opened: ModernOpened
  readonly server: ServerDefinition
}

export type Routed = StatusRoute | LoginRoute

/** The admission phase's result: a login that passed every check, with its place in the player registry. */
export interface Admitted {
  readonly route: LoginRoute
  readonly start: { readonly value: LoginStart; /** The frame as the client sent it. */ readonly raw: Buffer }
  /** The player as log lines name it. */
  readonly who: string
  /** Released when the setup fails; a relay that takes the connection over releases it when the session ends. */
  readonly lease: SessionLease
  /** Set by the authentication phase (client_only): who the player is, and its connection's encryption. */
  readonly authentication?: Authentication
}

/** A player authenticated at the proxy: the session service's profile, and the ciphers now on its connection. */
export interface Authentication {
  readonly profile: {
    /** Dashed. */
    readonly uuid: string
    readonly name: string
    readonly properties: ReadonlyArray<GameProfileProperty>
  }
  /** Their state continues from the authentication: whoever writes or reads the player next uses these. */
  readonly encrypt: StreamCipher
  readonly decrypt: StreamCipher
}

/** How the join ended: a relay owns the connection now, or the phase closed it (and gave back what it held). */
export type Joined = "relayed" | "closed"
