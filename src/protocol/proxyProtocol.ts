/** PROXY protocol v1 (text) and v2 (binary) headers, as sent by HAProxy and cloud load balancers. */
import ipaddr from "ipaddr.js"
import { isIPv4 } from "node:net"

export interface ProxyEndpoint {
  readonly address: string
  readonly port: number
}

export type ProxyHeaderRead =
  | { readonly _tag: "Incomplete" }
  | { readonly _tag: "Invalid"; readonly reason: string }
  | {
      readonly _tag: "Header"
      readonly version: 1 | 2
      /** `LOCAL` (v2) and `UNKNOWN` (v1) carry no addresses: the socket's own are used. */
      readonly source: ProxyEndpoint | undefined
      readonly destination: ProxyEndpoint | undefined
      /** Bytes the header occupies; the client's own bytes start here. */
      readonly length: number
    }

export const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a])
const V1_PREFIX = Buffer.from("PROXY ", "latin1")
const V1_MAX_LENGTH = 107
/** Address block plus TLVs; a v2 header above this is refused (legitimate ones are a few hundred bytes). */
const V2_MAX_PAYLOAD = 4096

/** Whether the first bytes could still become a PROXY header (used to fail fast on anything else). */
const couldBePrefix = (buffer: Buffer, prefix: Buffer): boolean =>
  buffer.subarray(0, Math.min(buffer.length, prefix.length)).equals(prefix.subarray(0, Math.min(buffer.length, prefix.length)))

export const readProxyHeader = (buffer: Buffer): ProxyHeaderRead => {
  if (buffer.length === 0) return { _tag: "Incomplete" }
  if (couldBePrefix(buffer, V2_SIGNATURE)) return buffer.length < 16 ? { _tag: "Incomplete" } : readV2(buffer)
  if (couldBePrefix(buffer, V1_PREFIX)) return buffer.length < V1_PREFIX.length ? { _tag: "Incomplete" } : readV1(buffer)
  return { _tag: "Invalid", reason: "the connection does not start with a PROXY protocol header" }
}

const readV1 = (buffer: Buffer): ProxyHeaderRead => {
  const end = buffer.indexOf("\r\n", 0, "latin1")
  if (end < 0) {
    return buffer.length >= V1_MAX_LENGTH ? { _tag: "Invalid", reason: "PROXY v1 header longer than 107 bytes" } : { _tag: "Incomplete" }
  }
  if (end + 2 > V1_MAX_LENGTH) return { _tag: "Invalid", reason: "PROXY v1 header longer than 107 bytes" }
  const parts = buffer.toString("latin1", 0, end).split(" ")
  const length = end + 2
  if (parts[1] === "UNKNOWN") return { _tag: "Header", version: 1, source: undefined, destination: undefined, length }
  if (parts.length !== 6 || (parts[1] !== "TCP4" && parts[1] !== "TCP6")) {
    return { _tag: "Invalid", reason: "malformed PROXY v1 header" }
  }
  const [, family, src, dst, sport, dport] = parts as [string, string, string, string, string, string]
  // Node's own check for IPv4 (the same rule as ipaddr.js's four decimal parts, at a fraction of its cost per flood
  // connection).
  const validAddress = (text: string) => (family === "TCP4" ? isIPv4(text) : ipaddr.IPv6.isValid(text))
  const validPort = (text: string) => /^\d{1,5}$/.test(text) && Number(text) <= 65535
  if (!validAddress(src) || !validAddress(dst) || !validPort(sport) || !validPort(dport)) {
    return { _tag: "Invalid", reason: "malformed address in PROXY v1 header" }
  }
  return {
    _tag: "Header",
    version: 1,
    source: { address: src, port: Number(sport) },
    destination: { address: dst, port: Number(dport) },
    length
  }
}

const readV2 = (buffer: Buffer): ProxyHeaderRead => {
  const versionCommand = buffer[12]!
  if (versionCommand >> 4 !== 2) return { _tag: "Invalid", reason: "PROXY v2 header with an unknown version" }
  const command = versionCommand & 0x0f
  if (command !== 0 && command !== 1) return { _tag: "Invalid", reason: "PROXY v2 header with an unknown command" }
  const family = buffer[13]!
  const payload = buffer.readUInt16BE(14)
  if (payload > V2_MAX_PAYLOAD) return { _tag: "Invalid", reason: `PROXY v2 header of ${payload} bytes` }
  const length = 16 + payload
  if (buffer.length < length) return { _tag: "Incomplete" }
  if (command === 0) return { _tag: "Header", version: 2, source: undefined, destination: undefined, length }
  const block = buffer.subarray(16, length)
  switch (family) {
    case 0x11: // TCP over IPv4
    case 0x12: {
      if (block.length < 12) return { _tag: "Invalid", reason: "PROXY v2 IPv4 address block too short" }
      return {
        _tag: "Header",
        version: 2,
        source: { address: [...block.subarray(0, 4)].join("."), port: block.readUInt16BE(8) },
        destination: { address: [...block.subarray(4, 8)].join("."), port: block.readUInt16BE(10) },
        length
      }
    }
    case 0x21: // TCP over IPv6
    case 0x22: {
      if (block.length < 36) return { _tag: "Invalid", reason: "PROXY v2 IPv6 address block too short" }
      const v6 = (bytes: Buffer) => ipaddr.fromByteArray([...bytes]).toString()
      return {
        _tag: "Header",
        version: 2,
        source: { address: v6(block.subarray(0, 16)), port: block.readUInt16BE(32) },
        destination: { address: v6(block.subarray(16, 32)), port: block.readUInt16BE(34) },
        length
      }
    }
    default:
      // UNSPEC and UNIX carry no usable client address: treat like LOCAL.
      return { _tag: "Header", version: 2, source: undefined, destination: undefined, length }
  }
}

/** A PROXY v2 header announcing `source` -> `destination` over TCP (IPv4 when both are IPv4, else IPv6). */
export const encodeProxyV2 = (source: ProxyEndpoint, destination: ProxyEndpoint): Buffer => {
  const src = ipaddr.process(source.address)
  const dst = ipaddr.process(destination.address)
  const v4 = src.kind() === "ipv4" && dst.kind() === "ipv4"
  const bytes = (address: ipaddr.IPv4 | ipaddr.IPv6) =>
    v4 ? (address as ipaddr.IPv4).toByteArray() : (address.kind() === "ipv4" ? (address as ipaddr.IPv4).toIPv4MappedAddress() : address).toByteArray()
  const block = Buffer.alloc(v4 ? 12 : 36)
  Buffer.from(bytes(src)).copy(block, 0)
  Buffer.from(bytes(dst)).copy(block, v4 ? 4 : 16)
  block.writeUInt16BE(source.port, v4 ? 8 : 32)
  block.writeUInt16BE(destination.port, v4 ? 10 : 34)
  const header = Buffer.alloc(16)
  V2_SIGNATURE.copy(header, 0)
  header[12] = 0x21
  header[13] = v4 ? 0x11 : 0x21
  header.writeUInt16BE(block.length, 14)
  return Buffer.concat([header, block])
}

/** A PROXY v2 LOCAL header: the proxy's own connection (a health check), no client address. */
export const encodeProxyV2Local = (): Buffer => {
  const header = Buffer.alloc(16)
  V2_SIGNATURE.copy(header, 0)
  header[12] = 0x20
  header[13] = 0x00
  header.writeUInt16BE(0, 14)
  return header
}
