/**
 * The packet relay modes: `offline` (the player's name is trusted) and `client_only` (authenticated at the proxy
 * first, session/authentication.ts). Both run the same packet relay (PacketRelay.ts); they differ before it.
 */
import type { RelayMode } from "../RelayMode.js"
import { startPacketRelay } from "./PacketRelay.js"

export const offlineMode: RelayMode = { name: "offline", kind: "packet", authenticates: false, start: startPacketRelay }

export const clientOnlyMode: RelayMode = { name: "client_only", kind: "packet", authenticates: true, start: startPacketRelay }
