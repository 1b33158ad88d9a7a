/**
 * Player-info forwarding payloads that ride in the handshake (BungeeCord `legacy`, BungeeGuard `legacy_guard`), and
 * the profile properties that stand in for a Forge client's handshake marker where forwarding drops it.
 */
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

/**
 * The Forge marker that follows the host in a handshake address (`suffix`, from the first NUL): `\0FML\0` of a
 * 1.7-1.12 Forge client, or `\0FML2\0`, `\0FML3\0`, `\0FORGE...` of a 1.13+ one.
 */
export const forgeMarker = (suffix: string): "legacy" | "modern" | undefined => {
  if (suffix.startsWith("\0FML\0")) return "legacy"
  return /^\0(?:FML\d+\0|FORGE)/.test(suffix) ? "modern" : undefined
}

/**
 * What a Forge-aware proxy adds to the forwarded profile, since legacy forwarding puts its own fields where the
 * marker was and modern forwarding's payload has no room for it: with `legacy`, a 1.7-1.12 Forge client gets
 * `forgeClient` and `extraData` (the marker, NULs as U+0001), as BungeeCord adds them; with `modern`, a 1.13+ Forge
 * client gets `forgeClient`, as Velocity adds it. Nothing for other clients.
 */
export const forgeProperties = (suffix: string, forwarding: "legacy" | "modern"): ReadonlyArray<GameProfileProperty> => {
  const marker = forgeMarker(suffix)
  if (forwarding === "legacy") {
    return marker === "legacy" ? [{ name: "forgeClient", value: "true" }, { name: "extraData", value: suffix.replace(/\0/g, "\u0001"), signature: "" }] : []
  }
  return marker === "modern" ? [{ name: "forgeClient", value: "true" }] : []
}
