/** A player connection as the session phases see it: its socket, its id, and who is at the other end. */
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
  try {
    return ipaddr.process(address).toString()
  } catch {
    return address
  }
}

/** The peer as the socket shows it; the local side is looked up only if something asks (a system call). */
export const socketPeer = (socket: Socket): Peer => ({
  clientIp: normaliseIp(socket.remoteAddress),
  clientPort: socket.remotePort ?? 0,
  get localIp() {
    return normaliseIp(socket.localAddress)
  },
  get localPort() {
    return socket.localPort ?? 0
  }
})

/** The PROXY protocol v2 header that opens every backend connection of a server with `send_proxy_protocol`. */
export const backendPreamble = (server: ServerDefinition, peer: Peer): Buffer | undefined =>
  server.config.send_proxy_protocol
    ? encodeProxyV2({ address: peer.clientIp, port: peer.clientPort }, { address: peer.localIp, port: peer.localPort })
    : undefined
