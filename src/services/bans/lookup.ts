/**
 * In-memory indexes over the bans, rebuilt on every change (changes are rare, lookups happen on every connection):
 * maps by address, lower-cased name and UUID, and ranges per IP family by prefix length and network (pure).
 */
import ipaddr from "ipaddr.js"
import type { Ban } from "./file.js"
import { isRange, normaliseUuid, parseClientAddress, targetKey } from "./target.js"

/**
 * Range bans of one family by prefix length, then by network (the address masked to the prefix: a number for IPv4,
 * the masked bytes as a string for IPv6): a lookup costs one map lookup per prefix length in use, however many ranges
 * are banned (a list scanned on every connection cost 3.6 ms with 100,000 ranges; this costs microseconds).
 */
type RangeBuckets = ReadonlyMap<number, ReadonlyMap<number | string, Ban>>

/** An IPv4 address's first `prefix` bits as a number. */
const network4 = (bytes: ReadonlyArray<number>, prefix: number): number =>
  prefix === 0 ? 0 : (((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) & (0xffffffff << (32 - prefix))) >>> 0

/** An IPv6 address's first `prefix` bits, the rest zero, as a string key. */
const network6 = (bytes: ReadonlyArray<number>, prefix: number): string => {
  let key = ""
  for (let i = 0; i < bytes.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8))
    key += String.fromCharCode(bits === 0 ? 0 : bytes[i]! & ((0xff << (8 - bits)) & 0xff))
  }
  return key
}

const networkOf = (bytes: ReadonlyArray<number>, prefix: number): number | string =>
  bytes.length === 4 ? network4(bytes, prefix) : network6(bytes, prefix)

const addRange = (buckets: Map<number, Map<number | string, Ban>>, bytes: ReadonlyArray<number>, prefix: number, ban: Ban) => {
  let bucket = buckets.get(prefix)
  if (bucket === undefined) buckets.set(prefix, (bucket = new Map()))
  bucket.set(networkOf(bytes, prefix), ban)
}

/** A stored IPv4 range (normalised: four decimal parts and a prefix), read without ipaddr.js's general parser. */
const V4_RANGE = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/

const findRange = (buckets: RangeBuckets, address: ipaddr.IPv4 | ipaddr.IPv6, nowMs: number): Ban | undefined => {
  if (buckets.size === 0) return undefined
  const bytes = address.toByteArray()
  for (const [prefix, bucket] of buckets) {
    const ban = bucket.get(networkOf(bytes, prefix))
    if (ban !== undefined && isActive(ban, nowMs)) return ban
  }
  return undefined
}

export interface BanIndex {
  /** Every ban by target key, in file order. */
  readonly all: ReadonlyMap<string, Ban>
  readonly ips: ReadonlyMap<string, Ban>
  readonly names: ReadonlyMap<string, Ban>
  readonly uuids: ReadonlyMap<string, Ban>
  readonly ranges4: RangeBuckets
  readonly ranges6: RangeBuckets
}

/** Whether `a` ends after `b` (a permanent ban ends never). */
const outlasts = (a: Ban, b: Ban): boolean => (a.expires_at === null ? b.expires_at !== null : b.expires_at !== null && a.expires_at > b.expires_at)

/**
 * Builds the indexes. Portal itself keeps one record per target (a ban added again replaces the old one), so two
 * records of one target come from a hand edit of the file: the one that lasts longer holds, so that a stray line
 * never shortens a ban (a permanent one included) without anyone noticing; of two that end together, the later.
 */
export const buildIndex = (bans: Iterable<Ban>): BanIndex => {
  const all = new Map<string, Ban>()
  for (const ban of bans) {
    const key = targetKey(ban.target)
    const other = all.get(key)
    if (other !== undefined && outlasts(other, ban)) continue
    all.delete(key) // the replacement goes to the end, where a fresh ban would be
    all.set(key, ban)
  }
  const ips = new Map<string, Ban>()
  const names = new Map<string, Ban>()
  const uuids = new Map<string, Ban>()
  const ranges4 = new Map<number, Map<number | string, Ban>>()
  const ranges6 = new Map<number, Map<number | string, Ban>>()
  for (const ban of all.values()) {
    const { type, value } = ban.target
    if (type === "username") names.set(value.toLowerCase(), ban)
    else if (type === "uuid") uuids.set(value, ban)
    else if (!isRange(ban.target)) ips.set(value, ban)
    else {
      // 100,000 ranges took ipaddr.parseCIDR 0.6 s, at every change of the bans.
      const v4 = V4_RANGE.exec(value)
      if (v4 !== null) addRange(ranges4, [Number(v4[1]), Number(v4[2]), Number(v4[3]), Number(v4[4])], Number(v4[5]), ban)
      else {
        const [address, prefix] = ipaddr.parseCIDR(value)
        addRange(address.kind() === "ipv4" ? ranges4 : ranges6, address.toByteArray(), prefix, ban)
      }
    }
  }
  return { all, ips, names, uuids, ranges4, ranges6 }
}

export const EMPTY_INDEX: BanIndex = buildIndex([])

/** Whether a ban applies at `nowMs`: it stops applying at its expiry exactly. */
export const isActive = (ban: Ban, nowMs: number): boolean => ban.expires_at === null || nowMs < ban.expires_at * 1000

export const findIpBan = (index: BanIndex, ip: string, nowMs: number): Ban | undefined => {
  if (index.ips.size === 0 && index.ranges4.size === 0 && index.ranges6.size === 0) return undefined
  const address = parseClientAddress(ip)
  if (address === undefined) return undefined
  const exact = index.ips.get(address.toString())
  if (exact !== undefined && isActive(exact, nowMs)) return exact
  return findRange(address.kind() === "ipv4" ? index.ranges4 : index.ranges6, address, nowMs)
}

export const findPlayerBan = (
  index: BanIndex,
  player: { readonly name: string; readonly uuid: string | undefined },
  nowMs: number
): Ban | undefined => {
  if (index.uuids.size === 0 && index.names.size === 0) return undefined
  const uuid = player.uuid === undefined ? undefined : normaliseUuid(player.uuid)
  const byUuid = uuid === undefined ? undefined : index.uuids.get(uuid)
  if (byUuid !== undefined && isActive(byUuid, nowMs)) return byUuid
  const byName = index.names.get(player.name.trim().toLowerCase())
  return byName !== undefined && isActive(byName, nowMs) ? byName : undefined
}
