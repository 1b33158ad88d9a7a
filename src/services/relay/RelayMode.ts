/**
 * The relay mode port: how a player's bytes move once Portal has joined them to a backend. One implementation per
 * kind of `proxy_mode` (raw forwarding for passthrough and server_only, splice(2) for zero_copy; the packet modes
 * come next), chosen in one place (`relay/modes.ts`). A mode owns both sockets from `start` to its end, reports once
 * through `onEnd`, and can be ended from outside at any time (a kick, a ban, shutdown).
 */
import type { Socket } from "node:net"
import type { RelayTimeouts, RelayWatchdog } from "./watchdog.js"

export type RelayEnd =
  | "client_closed"
  | "backend_closed"
  | "read_timeout"
  | "write_timeout"
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

/** What a relay mode is handed: both connected sockets, the backend already sent what it must see first. */
export interface RelayStart {
  readonly client: Socket
  readonly backend: Socket
  readonly timeouts: RelayTimeouts
  /** Runs once, after both sockets are destroyed. */
  readonly onEnd: (outcome: RelayOutcome) => void
}

export interface RelayMode {
  /** As logged and reported: `passthrough` (the raw forwarder) or `zero_copy` (splice). */
  readonly name: string
  /** Starts relaying and returns at once; the relay lives on its own (callbacks, no fiber) until it ends. */
  readonly start: (request: RelayStart, watchdog: RelayWatchdog) => LiveRelay
}

/** How long the other side may go on after one side ended cleanly. */
export const LINGER_MS = 2_000
