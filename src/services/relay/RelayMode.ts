/**
 * The relay mode port: how a player's bytes move once Portal has joined them to a backend. One implementation per
 * kind of `proxy_mode` (raw forwarding for passthrough and server_only, splice(2) for zero_copy, the packet relay for
 * offline and client_only), chosen in one place (`relay/modes.ts`). A mode owns both sockets from `start` to its end, reports once
 * through `onEnd`, and can be ended from outside at any time (a kick, a ban, shutdown).
 */
import type { Socket } from "node:net"
import type { PacketStart } from "./packet/PacketStart.js"
import type { RelayTimeouts, RelayWatchdog } from "./watchdog.js"

export type RelayEnd =
  | "client_closed"
  | "backend_closed"
  | "read_timeout"
  | "write_timeout"
  /** The player took nothing for `[timeouts].write` while Portal had bytes for it. */
  | "player_timeout"
  | "error"
  /** Ended from outside: a kick, a ban, or Portal shutting down. */
  | "ended"

export interface RelayOutcome {
  readonly end: RelayEnd
  /** The error, or the reason the session was ended from outside. */
  readonly detail?: string
}

/** Bytes from and to the player over the whole connection, readable at any time. */
export interface ByteMeter {
  /** Bytes received from the player so far. */
  readonly bytesIn: () => number
  /** Bytes sent to the player so far. */
  readonly bytesOut: () => number
}

/** A relayed session as the rest of Portal sees it. */
export interface LiveRelay {
  readonly meter: ByteMeter
  /**
   * Ends the session now. The player is told `reason` where the protocol still allows a message (a raw mode can only
   * while the backend has sent the player nothing: the connection is then still in the login state, unencrypted);
   * otherwise the connection is closed. The end is reported through `onEnd` as `ended` with the reason. Idempotent.
   */
  readonly end: (reason: string) => void
}

/**
 * What a relay mode is handed: both connected sockets. A raw mode's backend has already been sent what it must see
 * first (the replayed login); a packet mode gets `packet` instead and logs into the backend itself.
 */
export interface RelayStart {
  readonly client: Socket
  readonly backend: Socket
  readonly timeouts: RelayTimeouts
  /** Runs once, after both sockets are destroyed. */
  readonly onEnd: (outcome: RelayOutcome) => void
  /** The login a packet mode carries out with the backend; absent for the raw modes. */
  readonly packet?: PacketStart
}

export interface RelayMode {
  /** As logged and reported: `passthrough` (the raw forwarder), `zero_copy` (splice), `offline`, `client_only`. */
  readonly name: string
  /**
   * `raw`: bytes relayed as they are, after the join replayed the login to the backend. `packet`: the mode frames
   * both directions and logs into the backend itself from `RelayStart.packet`.
   */
  readonly kind: "raw" | "packet"
  /** Whether players are authenticated at the proxy before the join (client_only: session/authentication.ts). */
  readonly authenticates: boolean
  /** Starts relaying and returns at once; the relay lives on its own (callbacks, no fiber) until it ends. */
  readonly start: (request: RelayStart, watchdog: RelayWatchdog) => LiveRelay
}

/** How long the other side may go on after one side ended cleanly. */
export const LINGER_MS = 2_000
