/**
 * What a server-list answer says: the backend's live answer with `[motd.online]` laid over it, or an answer
 * Portal composes for the other states (and for unknown domains). Pure functions over JSON.
 */
import type { MotdEntry, MotdTable, ServerState } from "../../schema/common.js"
import type { LegacyStatus } from "../../protocol/legacy.js"
import type { StatusJson } from "../../protocol/status.js"
import { legacyText } from "../../protocol/text.js"

export const BUILT_IN_TEXT: Record<ServerState, string> = {
  online: "§7A Minecraft server behind §bPortal",
  offline: "§cThis server is offline.",
  sleeping: "§7This server is sleeping. §aJoin to wake it up!",
  starting: "§eThis server is starting, please wait...",
  crashed: "§cThis server stopped unexpectedly. §7Join to start it again.",
  stopping: "§6This server is stopping.",
  unreachable: "§cThis server cannot be reached right now."
}

export const UNKNOWN_DOMAIN_TEXT = "§7No server answers to this address."

/** `[motd.<state>]`, else `[default_motd.<state>]`, else nothing (the caller uses a built-in text). */
export const motdEntryFor = (state: ServerState, own: MotdTable | undefined, defaults: MotdTable): MotdEntry | undefined =>
  own?.[state] ?? defaults[state]

/** The backend's answer with the configured fields written over it; every other field passes through. */
export const overlayOnline = (live: StatusJson, entry: MotdEntry | undefined): StatusJson => {
  if (entry === undefined) return live
  const out: StatusJson = { ...live }
  out.description = entry.text
  if (entry.favicon !== undefined) out.favicon = entry.favicon
  if (entry.version_name !== undefined) {
    out.version = { name: entry.version_name, protocol: live.version?.protocol ?? -1 }
  }
  if (entry.max_players !== undefined) {
    out.players = { ...(live.players ?? { online: 0 }), max: entry.max_players }
  }
  return out
}

export interface ComposeInput {
  readonly entry: MotdEntry | undefined
  readonly fallbackText: string
  /** The client's protocol: echoed so the list shows no version warning unless a version_name asks to be seen. */
  readonly protocolVersion: number
  readonly online: number
  readonly max: number
}

/** An answer Portal writes itself: the MOTD text, counts from the PlayerRegistry, the favicon if any. */
export const composeStatus = (input: ComposeInput): StatusJson => {
  const entry = input.entry
  const json: StatusJson = {
    version:
      entry?.version_name !== undefined
        ? // A protocol no client speaks makes the list show the version text (in red), as a status label.
          { name: entry.version_name, protocol: -1 }
        : { name: "Portal", protocol: input.protocolVersion },
    players: { max: entry?.max_players ?? input.max, online: input.online, sample: [] },
    description: entry?.text ?? input.fallbackText
  }
  if (entry?.favicon !== undefined) json.favicon = entry.favicon
  return json
}

/** The same answer for a pre-1.7 client. */
export const toLegacyStatus = (json: StatusJson): LegacyStatus => ({
  protocolVersion: typeof json.version?.protocol === "number" ? json.version.protocol : -1,
  versionName: typeof json.version?.name === "string" ? json.version.name : "",
  motd: legacyText(json.description),
  online: typeof json.players?.online === "number" ? json.players.online : 0,
  max: typeof json.players?.max === "number" ? json.players.max : 0
})
