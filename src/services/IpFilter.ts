/**
 * IpFilter: the `[ip_filter]` rule, globally (before the handshake) and per server (after routing): an address is
 * allowed when it is not blacklisted AND (the whitelist is empty OR it is whitelisted). IPv4-mapped IPv6 addresses
 * match IPv4 ranges. Lists are compiled once per configuration snapshot.
 */
import * as Effect from "effect/Effect"
import ipaddr from "ipaddr.js"
import type { IpFilter as IpFilterConfig } from "../schema/common.js"
import type { ServerDefinition } from "../schema/decode.js"
import type { ConfigSnapshot } from "./ConfigStore.js"

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number]

export interface CompiledFilter {
  readonly whitelist: ReadonlyArray<Range>
  readonly blacklist: ReadonlyArray<Range>
}

const compileRange = (text: string): Range => {
  const value = text.trim()
  if (value.includes("/")) {
    const [address, bits] = ipaddr.parseCIDR(value)
    // A mapped IPv4 range (::ffff:10.0.0.0/104) is the same as the plain IPv4 range.
    if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
      return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96]
    }
    return [address, bits]
  }
  const address = ipaddr.process(value)
  return [address, address.kind() === "ipv4" ? 32 : 128]
}

export const compileFilter = (config: IpFilterConfig): CompiledFilter => ({
  whitelist: config.whitelist.map(compileRange),
  blacklist: config.blacklist.map(compileRange)
})

const inRanges = (address: ipaddr.IPv4 | ipaddr.IPv6, ranges: ReadonlyArray<Range>): boolean =>
  ranges.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits))

/** The specification's rule. An address that does not parse is allowed only by an empty whitelist. */
export const isAllowed = (filter: CompiledFilter, ip: string): boolean => {
  if (filter.whitelist.length === 0 && filter.blacklist.length === 0) return true
  let address: ipaddr.IPv4 | ipaddr.IPv6
  try {
    address = ipaddr.process(ip)
  } catch {
    return filter.whitelist.length === 0
  }
  if (inRanges(address, filter.blacklist)) return false
  return filter.whitelist.length === 0 || inRanges(address, filter.whitelist)
}

/** The connection path's surface: synchronous, called for every connection. */
export interface IpFilterDataPlane {
  /** The global filter of a snapshot (every connection, before the handshake). */
  readonly allowedGlobally: (snapshot: ConfigSnapshot, ip: string) => boolean
  /** A server's own filter (after routing). */
  readonly allowedFor: (server: ServerDefinition, ip: string) => boolean
}

export class IpFilter extends Effect.Service<IpFilter>()("portal/IpFilter", {
  effect: Effect.sync(() => {
    const globals = new WeakMap<ConfigSnapshot, CompiledFilter>()
    const perServer = new WeakMap<ServerDefinition, CompiledFilter>()
    const globalFilter = (snapshot: ConfigSnapshot) => {
      let filter = globals.get(snapshot)
      if (filter === undefined) globals.set(snapshot, (filter = compileFilter(snapshot.global.ip_filter)))
      return filter
    }
    const serverFilter = (server: ServerDefinition) => {
      let filter = perServer.get(server)
      if (filter === undefined) perServer.set(server, (filter = compileFilter(server.config.ip_filter)))
      return filter
    }
    const dataPlane: IpFilterDataPlane = {
      allowedGlobally: (snapshot, ip) => isAllowed(globalFilter(snapshot), ip),
      allowedFor: (server, ip) => isAllowed(serverFilter(server), ip)
    }
    return { dataPlane }
  })
}) {}
