/**
 * Client addresses as 128-bit keys, without allocating: IPv6 as its 128 bits, IPv4 (and IPv4-mapped IPv6, in either
 * spelling) as ::ffff:a.b.c.d, so that both spellings of one client are one key. A zone (`fe80::1%eth0`) is ignored.
 * A string that is no address (`unknown`) still gets a key: a hash of its text in ff00::/8, a multicast range no
 * TCP peer can come from.
 */

const COLON = 58
const DOT = 46

/** The value of a hex digit, or -1. */
const hexDigit = (c: number): number =>
  c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1

/** Dotted-quad IPv4 in text[from, to) as an unsigned 32-bit number, or -1. */
const parseIpv4 = (text: string, from: number, to: number): number => {
  let value = 0
  let part = 0
  let digits = 0
  let parts = 0
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i)
    if (c === DOT) {
      if (digits === 0 || parts === 3) return -1
      value = value * 256 + part
      parts += 1
      part = 0
      digits = 0
    } else if (c >= 48 && c <= 57) {
      part = part * 10 + (c - 48)
      digits += 1
      if (digits > 3 || part > 255) return -1
    } else {
      return -1
    }
  }
  if (digits === 0 || parts !== 3) return -1
  return value * 256 + part
}

/** Groups of an IPv6 text; module-level scratch so that parsing allocates nothing. */
const groups = new Uint16Array(8)

/** Parses IPv6 text into `groups`; false when it is not IPv6. */
const parseIpv6 = (text: string): boolean => {
  const end = zoneStart(text)
  let n = 0
  let gap = -1
  let i = 0
  if (end < 2) return false
  if (text.charCodeAt(0) === COLON) {
    if (text.charCodeAt(1) !== COLON) return false
    gap = 0
    i = 2
  }
  while (i < end) {
    if (n === 8) return false
    const start = i
    let value = 0
    while (i < end) {
      const digit = hexDigit(text.charCodeAt(i))
      if (digit < 0) break
      value = value * 16 + digit
      i += 1
    }
    const digits = i - start
    if (i < end && text.charCodeAt(i) === DOT) {
      // An IPv4 tail (::ffff:1.2.3.4) takes the last two groups.
      if (n > 6) return false
      const v4 = parseIpv4(text, start, end)
      if (v4 < 0) return false
      groups[n++] = v4 >>> 16
      groups[n++] = v4 & 0xffff
      i = end
      break
    }
    if (digits === 0 || digits > 4) return false
    groups[n++] = value
    if (i === end) break
    if (text.charCodeAt(i) !== COLON) return false
    i += 1
    if (i < end && text.charCodeAt(i) === COLON) {
      if (gap >= 0) return false
      gap = n
      i += 1
    } else if (i === end) {
      return false // a single trailing colon
    }
  }
  if (gap < 0) return n === 8
  if (n > 7) return false
  // Move the groups after the gap to the end and fill the gap with zeros.
  const tail = n - gap
  for (let k = 0; k < tail; k++) groups[7 - k] = groups[n - 1 - k]!
  for (let k = gap; k < 8 - tail; k++) groups[k] = 0
  return true
}

/** Where a zone id (`%eth0`) starts, or the text's length. */
const zoneStart = (text: string): number => {
  const percent = text.indexOf("%")
  return percent < 0 ? text.length : percent
}

/** FNV-1a over the text's UTF-16 units, seeded. */
const hashText = (text: string, seed: number): number => {
  let h = (0x811c9dc5 ^ seed) | 0
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return h
}

/**
 * Writes the key of `text` into `out[0..3]` (most significant word first): its 128 bits when it is an address,
 * else a hash of its text in ff00::/8. Allocates nothing.
 */
export const addressKey = (text: string, out: Int32Array): void => {
  if (text.indexOf(":") < 0) {
    const v4 = parseIpv4(text, 0, text.length)
    if (v4 >= 0) {
      out[0] = 0
      out[1] = 0
      out[2] = 0xffff
      out[3] = v4 | 0
      return
    }
  } else if (parseIpv6(text)) {
    out[0] = (groups[0]! << 16) | groups[1]!
    out[1] = (groups[2]! << 16) | groups[3]!
    out[2] = (groups[4]! << 16) | groups[5]!
    out[3] = (groups[6]! << 16) | groups[7]!
    return
  }
  out[0] = 0xff000000 | (hashText(text, 0x9e3779b9) >>> 8)
  out[1] = hashText(text, 0x7f4a7c15)
  out[2] = hashText(text, 0x165667b1)
  out[3] = hashText(text, 0x27d4eb2f)
}

/** The key's text as IPv6 (IPv4 keys as ::ffff:a.b.c.d), for tests and diagnostics. */
export const keyText = (key: ArrayLike<number>): string => {
  const parts: Array<string> = []
  for (let w = 0; w < 4; w++) {
    const word = key[w]! >>> 0
    parts.push((word >>> 16).toString(16), (word & 0xffff).toString(16))
  }
  return parts.join(":")
}
