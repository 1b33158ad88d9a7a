/** Packet ids by protocol version (from the generated table) and the supported range for the refusal text. */
import { type PacketIds, PROTOCOL_TABLE, SUPPORTED_RANGE } from "./packetIds.generated.js"

export type * from "./packetIds.generated.js"

const BY_PROTOCOL = new Map(PROTOCOL_TABLE.map((entry) => [entry.protocol, entry]))

/** The ids of `protocolVersion`, or undefined when Portal's packet modes do not know that version. */
export const packetIdsFor = (protocolVersion: number): PacketIds | undefined => BY_PROTOCOL.get(protocolVersion)?.ids

/** The release names that speak `protocolVersion` (`["1.20.3", "1.20.4"]`), or undefined when unknown. */
export const versionNamesOf = (protocolVersion: number): ReadonlyArray<string> | undefined => BY_PROTOCOL.get(protocolVersion)?.names

export const SUPPORTED_PROTOCOLS: {
  readonly minProtocol: number
  readonly maxProtocol: number
  /** The oldest and newest release names (`1.7.6`, `26.1.2`). */
  readonly minVersion: string
  readonly maxVersion: string
  /** Every protocol number covered with its release names; a few old point releases in the range are missing. */
  readonly versions: ReadonlyArray<{ readonly protocol: number; readonly names: ReadonlyArray<string> }>
} = {
  ...SUPPORTED_RANGE,
  versions: PROTOCOL_TABLE.map(({ names, protocol }) => ({ protocol, names }))
}

/** "1.7.6 to 26.1.2": the range for a disconnect telling a player their version is not supported. */
export const supportedRangeText = (): string => `${SUPPORTED_PROTOCOLS.minVersion} to ${SUPPORTED_PROTOCOLS.maxVersion}`
