/**
 * What a status answer is cached under: the server, the configured domain the ping asked for, and the protocol
 * version. The domain matters because the backend sees the address the player typed (a backend that is itself a proxy
 * with forced hosts answers each name with its own MOTD). A name matched by a wildcard shares one entry with every
 * other name under it: a flood of made-up subdomains cannot bypass the cache and reach the backend once per name.
 */
import type { ServerDefinition } from "../../schema/decode.js"
import { splitAddress } from "../../protocol/handshake.js"

/** The entry for names a wildcard matched (no configured domain starts with a space). */
const WILDCARD = " wildcard"

/** The configured domain of `server` a handshake address asked for, or one shared name for a wildcard match. */
const cachedDomainOf = (server: ServerDefinition, address: string): string => {
  const host = splitAddress(address).host
  return server.config.domains.includes(host) ? host : WILDCARD
}

export const statusCacheKey = (server: ServerDefinition, address: string, protocolVersion: number): string =>
  `${server.id}\0${cachedDomainOf(server, address)}\0${protocolVersion}`
