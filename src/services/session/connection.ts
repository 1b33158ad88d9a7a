/** A player connection as the session phases see it: its socket, its id, and who is at the other end. */
import type * as Effect from "effect/Effect"
import ipaddr from "ipaddr.js"
import type { Socket } from "node:net"
import { encodeProxyV2 } from "../../protocol/proxyProtocol.js"
import type { ServerDefinition } from "../../schema/decode.js"
import type { ConnectionTrace } from "../telemetry/connectionTrace.js"

export interface Connection {
  readonly id: number
  readonly socket: Socket
  /**
   * The connection's trace, when it is traced (telemetry/connectionTrace.ts): set at its start, or at the handshake
   * for a login; the phases fill it in, and whoever ends the connection hands it over.
   */
  trace?: ConnectionTrace | undefined
}

/** Starts a connection's fiber among the listener's (which are drained, then interrupted, at shutdown). */
export type Fork = (effect: Effect.Effect<void>) => void

/** How a listener hands its connections over (session/pipeline.ts). */
export interface ConnectionHandler {
  /** Takes one connection: its opening runs on callbacks, the rest in a fiber started with `fork`. Never throws. */
  readonly accept: (connection: Connection, fork: Fork) => void
  /** Connections still in their opening, or closing after it, without a fiber. */
  readonly opening: () => number
  /** Closes the connections still in their opening (at shutdown, once the grace is over). */
  readonly closeOpenings: () => void
  /** Sockets accepted whose close has not been seen yet (a destroyed socket says so on a later turn of the loop). */
  readonly unclosed: () => number
}

/** The two ends of a connection as the client sees them (from the socket, or from a PROXY protocol header). */
export interface Peer {
  readonly clientIp: string
  readonly clientPort: number
  readonly localIp: string
  readonly localPort: number
}

/** Gives back something a connection holds; idempotent. */
export type Release = () => void

export const noRelease: Release = () => {}

/** Normalises an address as Node reports it (`::ffff:1.2.3.4` becomes `1.2.3.4`). */
export const normaliseIp = (address: string | undefined): string => {
  if (address === undefined) return "unknown"
  // The common cases need no parsing: a plain IPv4 address, or an IPv6 one that is not IPv4-mapped.
  if (!address.includes(":")) return address
  if (!address.startsWith("::ffff:") && !address.includes("%")) return address
  return normaliseHeaderIp(address)
}

/**
 * Normalises an address as a PROXY header spells it: any IPv6 spelling (`::FFFF:1.2.3.4`, `0:0:0:0:0:ffff:102:304`,
 * `2001:DB8:0::1`) becomes the one Node would report for the same client, so logs, the player list and bans by
 * address show one form. IPv4 arrives checked as four decimal parts.
 */
export const normaliseHeaderIp = (address: string): string => {
  if (!address.includes(":")) return address
  try {
    return ipaddr.process(address).toString()
  } catch {
    return address
  }
}

/** A client seen through `socket`: the local side is looked up only if something asks (a system call). */
export const peerOn = (socket: Socket, clientIp: string, clientPort: number): Peer => ({
  clientIp,
  clientPort,
  get localIp() {
    return normaliseIp(socket.localAddress)
  },
  get localPort() {
    return socket.localPort ?? 0
  }
})

/** The peer as the socket shows it. */
export const socketPeer = (socket: Socket): Peer => peerOn(socket, normaliseIp(socket.remoteAddress), socket.remotePort ?? 0)

/** The PROXY protocol v2 header that opens every backend connection of a server with `send_proxy_protocol`. */
export const backendPreamble = (server: ServerDefinition, peer: Peer): Buffer | undefined =>
  server.config.send_proxy_protocol
    ? encodeProxyV2({ address: peer.clientIp, port: peer.clientPort }, { address: peer.localIp, port: peer.localPort })
    : undefined
