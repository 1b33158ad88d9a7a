/** IP addresses as Portal reads them from its files and its API: dotted quads and IPv6 only. */
import ipaddr from "ipaddr.js"

export type IpAddress = ipaddr.IPv4 | ipaddr.IPv6

/**
 * ipaddr.js also reads forms such as `127.1`, `0x7f.0.0.1` or `010.0.0.1` (octal), and takes `127/8` as
 * `0.0.0.127/8`: nobody means those in a filter or a ban, so they are refused instead of read differently.
 */
export const parseStrictAddress = (text: string): IpAddress | undefined => {
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return ipaddr.IPv4.parse(text)
  if (text.includes(":") && !text.includes("%") && ipaddr.IPv6.isValid(text)) return ipaddr.IPv6.parse(text)
  return undefined
}

/** `address/prefix` with a strict address and a prefix in range for its kind; `undefined` otherwise. */
export const parseStrictCidr = (text: string): [IpAddress, number] | undefined => {
  const slash = text.lastIndexOf("/")
  if (slash < 0) return undefined
  const address = parseStrictAddress(text.slice(0, slash))
  const prefixText = text.slice(slash + 1)
  if (address === undefined || !/^\d{1,3}$/.test(prefixText)) return undefined
  const prefix = Number(prefixText)
  return prefix <= (address.kind() === "ipv4" ? 32 : 128) ? [address, prefix] : undefined
}
