/** `host:port` addresses as written in the configuration, with IPv6 in brackets. */
import * as Either from "effect/Either"
import ipaddr from "ipaddr.js"

export interface HostPort {
  readonly host: string
  readonly port: number
}

const HOSTNAME = /^(?=.{1,253}$)([a-zA-Z0-9_]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?)(\.[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?)*\.?$/

// A name whose last label is a number is read as an IPv4 address by the resolver (`25565` is 0.0.99.221, `127.1` is
// 127.0.0.1): only the four decimal parts are accepted as such, so that `bind = "25565"` is not taken as a host.
const NUMERIC_LAST_LABEL = /(^|\.)(\d+|0x[0-9a-f]*)\.?$/i

/** True for an IP literal (dotted quad or IPv6) or a DNS host name. */
export const isValidHost = (host: string): boolean =>
  ipaddr.IPv4.isValidFourPartDecimal(host) ||
  // IPv6 has no short forms to misread; a zone id (`fe80::1%eth0`) is kept for link-local addresses.
  (host.includes(":") && ipaddr.IPv6.isValid(host)) ||
  (HOSTNAME.test(host) && !NUMERIC_LAST_LABEL.test(host))

/**
 * Parses `host`, `host:port`, `[v6]` or `[v6]:port`. `defaultPort` applies when the port is omitted;
 * `allowPortZero` permits port 0 (ask the OS for a free port, useful for listeners).
 */
export const parseHostPort = (
  text: string,
  options: { readonly defaultPort?: number; readonly allowPortZero?: boolean } = {}
): Either.Either<HostPort, string> => {
  const input = text.trim()
  if (input.includes("://")) return Either.left(`expected host:port without a scheme, got ${JSON.stringify(text)}`)
  let host: string
  let portText: string | undefined
  if (input.startsWith("[")) {
    const close = input.indexOf("]")
    if (close < 0) return Either.left(`missing "]" in ${JSON.stringify(text)}`)
    host = input.slice(1, close)
    const rest = input.slice(close + 1)
    if (rest.length > 0) {
      if (!rest.startsWith(":")) return Either.left(`unexpected text after "]" in ${JSON.stringify(text)}`)
      portText = rest.slice(1)
    }
    if (!ipaddr.IPv6.isValid(host)) return Either.left(`${JSON.stringify(host)} is not an IPv6 address`)
  } else {
    const colons = input.split(":").length - 1
    if (colons > 1) return Either.left(`IPv6 addresses need brackets, for example "[${input}]:25565"`)
    const colon = input.indexOf(":")
    host = colon < 0 ? input : input.slice(0, colon)
    portText = colon < 0 ? undefined : input.slice(colon + 1)
    if (host.length === 0) return Either.left(`missing host in ${JSON.stringify(text)}`)
    if (!isValidHost(host)) return Either.left(`${JSON.stringify(host)} is not a valid host name or IP address`)
  }
  let port: number
  if (portText === undefined) {
    if (options.defaultPort === undefined) return Either.left(`missing port in ${JSON.stringify(text)} (expected host:port)`)
    port = options.defaultPort
  } else {
    if (!/^\d{1,5}$/.test(portText)) return Either.left(`port ${JSON.stringify(portText)} is not a number`)
    port = Number(portText)
    const min = options.allowPortZero === true ? 0 : 1
    if (port < min || port > 65535) return Either.left(`port ${port} is out of range ${min}..65535`)
  }
  return Either.right({ host: host.toLowerCase(), port })
}

/** Formats an address the way the configuration writes it (IPv6 in brackets). */
export const formatHostPort = ({ host, port }: HostPort): string => (host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`)

/** Loopback: 127.0.0.0/8, ::1, IPv4-mapped loopback, and the name `localhost`. */
export const isLoopbackHost = (host: string): boolean => {
  if (host === "localhost") return true
  if (!ipaddr.isValid(host)) return false
  let address = ipaddr.parse(host)
  if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
    address = (address as ipaddr.IPv6).toIPv4Address()
  }
  return address.range() === "loopback"
}
