/**
 * Ban targets: validation and the one normal form each kind is stored and compared in (pure).
 * IP addresses take ipaddr.js's canonical text with IPv4-mapped IPv6 unwrapped; ranges keep their network address;
 * usernames keep the case they were given but compare lower-cased; UUIDs are dashed lower-case.
 */
import * as Either from "effect/Either"
import ipaddr from "ipaddr.js"
import { isPlayerName } from "../../schema/playerName.js"
import { type IpAddress, parseStrictAddress, parseStrictCidr } from "../../schema/ipAddress.js"

export type BanTargetType = "ip" | "username" | "uuid"

export interface BanTarget {
  readonly type: BanTargetType
  readonly value: string
}

type Address = IpAddress

const unmap = (address: Address): Address =>
  address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress() ? (address as ipaddr.IPv6).toIPv4Address() : address

// Dotted quads and IPv6 only, as in the configuration's IP filters (schema/ipAddress.ts).
const normaliseIpValue = (raw: string): Either.Either<string, string> => {
  const text = raw.trim()
  const invalid = Either.left(
    `${JSON.stringify(raw)} is not an IP address or CIDR range (for example "203.0.113.7", "203.0.113.0/24" or "2001:db8::/32")`
  )
  if (!text.includes("/")) {
    const address = parseStrictAddress(text)
    return address === undefined ? invalid : Either.right(unmap(address).toString())
  }
  const parsed = parseStrictCidr(text)
  if (parsed === undefined) return invalid
  let [address, prefix] = parsed
  // `::ffff:203.0.113.0/120` is an IPv4 range written the IPv6 way; clients in it are seen as IPv4.
  if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress() && prefix >= 96) {
    address = (address as ipaddr.IPv6).toIPv4Address()
    prefix -= 96
  }
  if (prefix === (address.kind() === "ipv4" ? 32 : 128)) return Either.right(address.toString())
  const network =
    address.kind() === "ipv4"
      ? ipaddr.IPv4.networkAddressFromCIDR(`${address.toString()}/${prefix}`)
      : ipaddr.IPv6.networkAddressFromCIDR(`${address.toString()}/${prefix}`)
  return Either.right(`${network.toString()}/${prefix}`)
}

const normaliseUsername = (raw: string): Either.Either<string, string> => {
  const name = raw.trim()
  return isPlayerName(name) ? Either.right(name) : Either.left(`${JSON.stringify(raw)} is not a player name (1 to 16 characters, no spaces)`)
}

/** Dashed lower-case form of a UUID written with or without dashes, or undefined. */
export const normaliseUuid = (raw: string): string | undefined => {
  const text = raw.trim().toLowerCase()
  const hex = /^[0-9a-f]{32}$/.test(text)
    ? text
    : /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(text)
      ? text.replaceAll("-", "")
      : undefined
  if (hex === undefined) return undefined
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

/** The stored form of a target, or why it is not a valid one. */
export const normaliseTarget = (target: BanTarget): Either.Either<BanTarget, string> => {
  switch (target.type) {
    case "ip":
      return Either.map(normaliseIpValue(target.value), (value) => ({ type: "ip", value }))
    case "username":
      return Either.map(normaliseUsername(target.value), (value) => ({ type: "username", value }))
    case "uuid": {
      const value = normaliseUuid(target.value)
      return value === undefined
        ? Either.left(`${JSON.stringify(target.value)} is not a UUID (32 hex digits, with or without dashes)`)
        : Either.right({ type: "uuid", value })
    }
  }
}

/** Identity of a normalised target: two bans with the same key are the same ban. */
/** Each target's key, made once: with a large ban file every change looks up every ban's (targets never change). */
const keys = new WeakMap<BanTarget, string>()

export const targetKey = (target: BanTarget): string => {
  let key = keys.get(target)
  if (key === undefined) {
    key = `${target.type}:${target.type === "username" ? target.value.toLowerCase() : target.value}`
    keys.set(target, key)
  }
  return key
}

/** Whether a normalised ip target is a range rather than a single address. */
export const isRange = (target: BanTarget): boolean => target.type === "ip" && target.value.includes("/")

/**
 * A client address as connections report it (`::ffff:1.2.3.4`, `2001:db8::1`, `fe80::1%eth0`), in the form IP bans
 * are stored in, or undefined when it is not an address.
 */
export const parseClientAddress = (ip: string): Address | undefined => {
  const text = ip.includes("%") ? ip.slice(0, ip.indexOf("%")) : ip
  if (!ipaddr.isValid(text)) return undefined
  return unmap(ipaddr.parse(text))
}

export const describeTarget = (target: BanTarget): string => `${target.type} ${target.value}`
