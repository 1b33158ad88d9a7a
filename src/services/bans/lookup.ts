/**
 * In-memory indexes over the bans, rebuilt on every change (changes are rare, lookups happen on every connection):
 * maps by address, lower-cased name and UUID, and a short list of ranges per IP family (pure).
 */
import ipaddr from "ipaddr.js"
import type { Ban } from "./file.js"
import { isRange, normaliseUuid, parseClientAddress, targetKey } from "./target.js"

interface RangeBan<A> {
  readonly range: [A, number]
  readonly ban: Ban
}

export interface BanIndex {
  /** Every ban by target key, in file order. */
  readonly all: ReadonlyMap<string, Ban>
  readonly ips: ReadonlyMap<string, Ban>
  readonly names: ReadonlyMap<string, Ban>
  readonly uuids: ReadonlyMap<string, Ban>
  readonly ranges4: ReadonlyArray<RangeBan<ipaddr.IPv4>>
  readonly ranges6: ReadonlyArray<RangeBan<ipaddr.IPv6>>
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
  const ranges4: Array<RangeBan<ipaddr.IPv4>> = []
  const ranges6: Array<RangeBan<ipaddr.IPv6>> = []
  for (const ban of all.values()) {
    const { type, value } = ban.target
    if (type === "username") names.set(value.toLowerCase(), ban)
    else if (type === "uuid") uuids.set(value, ban)
    else if (!isRange(ban.target)) ips.set(value, ban)
    else {
      const range = ipaddr.parseCIDR(value)
      if (range[0].kind() === "ipv4") ranges4.push({ range: range as [ipaddr.IPv4, number], ban })
      else ranges6.push({ range: range as [ipaddr.IPv6, number], ban })
    }
  }
  return { all, ips, names, uuids, ranges4, ranges6 }
}

export const EMPTY_INDEX: BanIndex = buildIndex([])

/** Whether a ban applies at `nowMs`: it stops applying at its expiry exactly. */
export const isActive = (ban: Ban, nowMs: number): boolean => ban.expires_at === null || nowMs < ban.expires_at * 1000

export const findIpBan = (index: BanIndex, ip: string, nowMs: number): Ban | undefined => {
  if (index.ips.size === 0 && index.ranges4.length === 0 && index.ranges6.length === 0) return undefined
  const address = parseClientAddress(ip)
  if (address === undefined) return undefined
  const exact = index.ips.get(address.toString())
  if (exact !== undefined && isActive(exact, nowMs)) return exact
  if (address.kind() === "ipv4") {
    const v4 = address as ipaddr.IPv4
    for (const entry of index.ranges4) if (isActive(entry.ban, nowMs) && v4.match(entry.range)) return entry.ban
  } else {
    const v6 = address as ipaddr.IPv6
    for (const entry of index.ranges6) if (isActive(entry.ban, nowMs) && v6.match(entry.range)) return entry.ban
  }
  return undefined
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
