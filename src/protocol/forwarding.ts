/** Player-info forwarding payloads that ride in the handshake (BungeeCord `legacy`, BungeeGuard `legacy_guard`). */
import { createHash } from "node:crypto"
import { formatUuid } from "./PacketReader.js"

export interface GameProfileProperty {
  readonly name: string
  readonly value: string
  readonly signature?: string
}

/** The UUID an offline-mode server gives a name: version-3 UUID of MD5("OfflinePlayer:<name>"). */
export const offlineUuid = (name: string): string => {
  const md5 = createHash("md5").update(`OfflinePlayer:${name}`, "utf8").digest()
  md5[6] = (md5[6]! & 0x0f) | 0x30
  md5[8] = (md5[8]! & 0x3f) | 0x80
  return formatUuid(md5)
}

/**
 * The handshake address of BungeeCord forwarding: `host \0 clientIp \0 uuidWithoutDashes [\0 propertiesJSON]`.
 * An IPv6 scope (`%eth0`) is removed from the client address.
 */
export const legacyForwardingAddress = (input: {
  readonly host: string
  readonly clientIp: string
  readonly uuid: string
  readonly properties: ReadonlyArray<GameProfileProperty>
}): string => {
  const ip = input.clientIp.replace(/%.*$/, "")
  let address = `${input.host}\0${ip}\0${input.uuid.replace(/-/g, "")}`
  if (input.properties.length > 0) address += `\0${JSON.stringify(input.properties)}`
  return address
}

/** The property BungeeGuard checks on the backend. */
export const bungeeGuardProperty = (token: string): GameProfileProperty => ({
  name: "bungeeguard-token",
  value: token,
  signature: ""
})
