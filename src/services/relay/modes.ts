/**
 * The one place that decides how a server's players are relayed: the relay mode for its `proxy_mode`, with the
 * fallback to the raw mode where zero_copy cannot splice (not Linux, or the addon was not built). `offline` and
 * `client_only` are the packet modes (relay/packet/).
 */
import type { ServerDefinition } from "../../schema/decode.js"
import { clientOnlyMode, offlineMode } from "./packet/packetModes.js"
import { rawMode } from "./rawMode.js"
import type { RelayMode } from "./RelayMode.js"
import { spliceMode } from "./spliceMode.js"
import { spliceSupport } from "./zeroCopy.js"

export interface ModeChoice {
  readonly mode: RelayMode
  /** Set when the server asked for a mode this process cannot run and gets `mode` instead: why. */
  readonly fallback?: string
}

const RAW: ModeChoice = { mode: rawMode }
const SPLICE: ModeChoice = { mode: spliceMode }
const OFFLINE: ModeChoice = { mode: offlineMode }
const CLIENT_ONLY: ModeChoice = { mode: clientOnlyMode }

export const relayModeFor = (server: ServerDefinition): ModeChoice => {
  switch (server.config.proxy_mode) {
    case "zero_copy": {
      const support = spliceSupport()
      return support.available ? SPLICE : { mode: rawMode, fallback: `zero_copy is unavailable (${support.reason})` }
    }
    case "offline":
      return OFFLINE
    case "client_only":
      return CLIENT_ONLY
    default:
      return RAW
  }
}

/** Whether a server's players go through a packet mode (offline, client_only), which knows packets per version. */
export const isPacketMode = (server: ServerDefinition): boolean => relayModeFor(server).mode.kind === "packet"
