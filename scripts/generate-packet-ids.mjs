// Writes src/protocol/packetIds.generated.ts: the ids of the packets Portal reads or writes, per protocol version,
// taken from minecraft-data (a dev dependency: the library is far too large to ship).
//
//   node scripts/generate-packet-ids.mjs            regenerate the committed file
//   node scripts/generate-packet-ids.mjs --stdout   print what would be written (the test compares it)
//
// Versions covered: every version minecraft-protocol supports (its `supportedVersions`, 1.7 to 26.1), plus the other
// release versions between them for which minecraft-data has a protocol definition (1.12.1, 1.16.2, 1.18.1, ...), and
// the releases it lists without one (1.9.1, 1.14.2) where the versions either side have the same ids, so that a player
// on such a release is not refused. Versions that share a protocol number share one table.
import { writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const require = createRequire(import.meta.url)
const OUTPUT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "src", "protocol", "packetIds.generated.ts")

/**
 * Portal's name for each packet -> the minecraft-data names it has had (the first one a version defines wins; two
 * defined at once is an error, so a wrong guess cannot go unnoticed).
 */
const WANTED = {
  handshaking: {
    serverbound: { handshake: ["set_protocol"] }
  },
  status: {
    clientbound: { statusResponse: ["server_info"], pong: ["ping"] },
    serverbound: { statusRequest: ["ping_start"], ping: ["ping"] }
  },
  login: {
    clientbound: {
      disconnect: ["disconnect"],
      encryptionRequest: ["encryption_begin"],
      loginSuccess: ["success"],
      setCompression: ["compress"],
      loginPluginRequest: ["login_plugin_request"],
      cookieRequest: ["cookie_request"]
    },
    serverbound: {
      loginStart: ["login_start"],
      encryptionResponse: ["encryption_begin"],
      loginPluginResponse: ["login_plugin_response"],
      loginAcknowledged: ["login_acknowledged"],
      cookieResponse: ["cookie_response"]
    }
  },
  configuration: {
    clientbound: {
      cookieRequest: ["cookie_request"],
      pluginMessage: ["custom_payload"],
      disconnect: ["disconnect"],
      finishConfiguration: ["finish_configuration"],
      keepAlive: ["keep_alive"],
      ping: ["ping"],
      resetChat: ["reset_chat"],
      registryData: ["registry_data"],
      removeResourcePack: ["remove_resource_pack"],
      addResourcePack: ["add_resource_pack", "resource_pack_send"],
      storeCookie: ["store_cookie"],
      transfer: ["transfer"],
      featureFlags: ["feature_flags"],
      tags: ["tags"],
      selectKnownPacks: ["select_known_packs"],
      customReportDetails: ["custom_report_details"],
      serverLinks: ["server_links"]
    },
    serverbound: {
      clientInformation: ["settings"],
      cookieResponse: ["cookie_response"],
      pluginMessage: ["custom_payload"],
      finishConfiguration: ["finish_configuration"],
      keepAlive: ["keep_alive"],
      pong: ["pong"],
      resourcePackResponse: ["resource_pack_receive"],
      selectKnownPacks: ["select_known_packs"]
    }
  },
  play: {
    clientbound: {
      disconnect: ["kick_disconnect"],
      keepAlive: ["keep_alive"],
      pluginMessage: ["custom_payload"],
      joinGame: ["login"],
      respawn: ["respawn"],
      legacyChat: ["chat"],
      systemChat: ["system_chat"],
      startConfiguration: ["start_configuration"],
      transfer: ["transfer"],
      bossBar: ["boss_bar"],
      playerInfo: ["player_info"],
      playerRemove: ["player_remove"],
      playerListHeader: ["playerlist_header"],
      scoreboardObjective: ["scoreboard_objective"],
      scoreboardDisplayObjective: ["scoreboard_display_objective"],
      teams: ["teams", "scoreboard_team"],
      addResourcePack: ["add_resource_pack", "resource_pack_send"],
      removeResourcePack: ["remove_resource_pack"],
      cookieRequest: ["cookie_request"],
      storeCookie: ["store_cookie"]
    },
    serverbound: {
      keepAlive: ["keep_alive"],
      pluginMessage: ["custom_payload"],
      chatMessage: ["chat_message", "chat"],
      chatCommand: ["chat_command"],
      chatCommandSigned: ["chat_command_signed"],
      clientInformation: ["settings"],
      configurationAcknowledged: ["configuration_acknowledged"],
      resourcePackResponse: ["resource_pack_receive"],
      cookieResponse: ["cookie_response"]
    }
  }
}

const DIRECTION_KEYS = { clientbound: "toClient", serverbound: "toServer" }
const RELEASE = /^\d+\.\d+(\.\d+)?$/

/** `{ "0x1f": "keep_alive", ... }` of one state and direction, or undefined when the version lacks the state. */
const mappings = (protocol, state, direction) => {
  const packet = protocol[state]?.[DIRECTION_KEYS[direction]]?.types?.packet
  if (packet === undefined) return undefined
  const idField = packet[1].find((field) => field.name === "name")
  return idField.type[1].mappings
}

const tableOf = (versionName, protocol) => {
  const table = {}
  for (const [state, directions] of Object.entries(WANTED)) {
    const stateTable = {}
    let present = false
    for (const [direction, packets] of Object.entries(directions)) {
      const map = mappings(protocol, state, direction)
      if (map === undefined) continue
      present = true
      const byName = new Map(Object.entries(map).map(([id, name]) => [name, Number.parseInt(id, 16)]))
      const ids = {}
      for (const [portalName, names] of Object.entries(packets)) {
        const found = names.filter((name) => byName.has(name))
        if (found.length > 1) throw new Error(`${versionName} ${state} ${direction}: ${found.join(" and ")} both exist`)
        if (found.length === 1) ids[portalName] = byName.get(found[0])
      }
      stateTable[direction] = ids
    }
    if (present) table[state] = stateTable
  }
  return table
}

/** The protocol numbers covered and the minecraft-data version whose definition each one uses. */
const coveredVersions = () => {
  const mcData = require("minecraft-data")
  const { supportedVersions } = require("minecraft-protocol")
  const protocolOf = (name) => {
    const data = mcData(name)
    if (data === null) throw new Error(`minecraft-data does not know ${name}`)
    return data.version.version
  }
  const primary = new Map()
  for (const name of supportedVersions) primary.set(protocolOf(name), name)
  const protocols = [...primary.keys()]
  const min = Math.min(...protocols)
  const max = Math.max(...protocols)
  const extra = new Map()
  for (const name of mcData.supportedVersions.pc) {
    if (!RELEASE.test(name)) continue
    const number = protocolOf(name)
    if (number >= min && number <= max && !primary.has(number)) extra.set(number, name)
  }
  const chosen = new Map([...primary, ...extra])
  const releaseNames = new Map()
  for (const entry of [...mcData.versions.pc].reverse()) {
    if (!entry.usesNetty || !RELEASE.test(entry.minecraftVersion) || !chosen.has(entry.version)) continue
    const names = releaseNames.get(entry.version) ?? []
    if (!names.includes(entry.minecraftVersion)) names.push(entry.minecraftVersion)
    releaseNames.set(entry.version, names)
  }
  const covered = [...chosen]
    .sort((a, b) => a[0] - b[0])
    .map(([protocol, dataVersion]) => ({
      protocol,
      dataVersion,
      names: releaseNames.get(protocol) ?? [dataVersion],
      table: tableOf(dataVersion, protocolDefinition(mcData, dataVersion))
    }))
  return [...covered, ...releasesWithoutDefinition(mcData, covered)].sort((a, b) => a.protocol - b.protocol)
}

/**
 * Releases inside the range whose protocol number minecraft-data lists but has no definition of its own (1.9.1 is
 * 108 between 1.9's 107 and 1.9.2's 109; 1.14.2 is 485): covered with the table of the versions either side when those
 * two agree, since the ids did not change across them. Otherwise a player on such a release would be refused with a
 * message naming a range that includes their version.
 */
const releasesWithoutDefinition = (mcData, covered) => {
  const min = covered[0].protocol
  const max = covered[covered.length - 1].protocol
  const known = new Set(covered.map((v) => v.protocol))
  const names = new Map()
  for (const entry of [...mcData.versions.pc].reverse()) {
    const protocol = entry.version
    if (!entry.usesNetty || !RELEASE.test(entry.minecraftVersion) || known.has(protocol) || protocol < min || protocol > max) continue
    names.set(protocol, [...(names.get(protocol) ?? []), entry.minecraftVersion])
  }
  const found = []
  for (const [protocol, releaseNames] of names) {
    const below = covered.filter((v) => v.protocol < protocol).at(-1)
    const above = covered.find((v) => v.protocol > protocol)
    if (below === undefined || above === undefined) continue
    if (tableSource(below.table) !== tableSource(above.table)) {
      throw new Error(`${releaseNames.join("/")} (protocol ${protocol}) has no definition, and the tables of ${below.dataVersion} and ${above.dataVersion} differ`)
    }
    found.push({ protocol, dataVersion: below.dataVersion, names: releaseNames, table: below.table })
  }
  return found
}

const protocolDefinition = (mcData, name) => {
  const protocol = mcData(name).protocol
  if (protocol === undefined) throw new Error(`minecraft-data has no protocol definition for ${name}`)
  return protocol
}

const hex = (id) => `0x${id.toString(16).padStart(2, "0")}`

/** Keys present in every table that has the state/direction are required; the others optional. */
const interfaceSource = (versions) => {
  const lines = []
  const typeName = (state, direction) => `${state[0].toUpperCase()}${state.slice(1)}${direction[0].toUpperCase()}${direction.slice(1)}Ids`
  const stateFields = []
  for (const [state, directions] of Object.entries(WANTED)) {
    const withState = versions.filter((v) => v.table[state] !== undefined)
    const directionFields = []
    for (const [direction, packets] of Object.entries(directions)) {
      const withDirection = withState.filter((v) => v.table[state][direction] !== undefined)
      if (withDirection.length === 0) continue
      const name = typeName(state, direction)
      lines.push(`export interface ${name} {`)
      for (const portalName of Object.keys(packets)) {
        const count = withDirection.filter((v) => v.table[state][direction][portalName] !== undefined).length
        if (count === 0) continue
        lines.push(`  readonly ${portalName}${count === withDirection.length ? "" : "?"}: number`)
      }
      lines.push("}", "")
      const always = withDirection.length === withState.length
      directionFields.push(`    readonly ${direction}${always ? "" : "?"}: ${name}`)
    }
    const always = withState.length === versions.length
    stateFields.push(`  readonly ${state}${always ? "" : "?"}: {`, ...directionFields, "  }")
  }
  lines.push("/** Packet ids of one protocol version, by state and direction; a packet the version lacks is absent. */")
  lines.push("export interface PacketIds {", ...stateFields, "}")
  return lines.join("\n")
}

const tableSource = (table) => {
  const lines = ["{"]
  for (const [state, directions] of Object.entries(table)) {
    lines.push(`  ${state}: {`)
    for (const [direction, ids] of Object.entries(directions)) {
      const entries = Object.entries(ids).map(([name, id]) => `${name}: ${hex(id)}`)
      lines.push(`    ${direction}: { ${entries.join(", ")} },`)
    }
    lines.push("  },")
  }
  lines.push("}")
  return lines.join("\n").replace(/,\n(\s*)\}/g, "\n$1}")
}

/** The whole generated module as text; deterministic for a given minecraft-data and minecraft-protocol. */
export const generatePacketIdsSource = () => {
  const versions = coveredVersions()
  const mcDataVersion = require("minecraft-data/package.json").version
  const mcProtocolVersion = require("minecraft-protocol/package.json").version
  const tables = new Map()
  const constants = []
  for (const version of versions) {
    const source = tableSource(version.table)
    let constant = tables.get(source)
    if (constant === undefined) {
      constant = `IDS_${version.protocol}`
      tables.set(source, constant)
      constants.push(`const ${constant}: PacketIds = ${source}`)
    }
    version.constant = constant
  }
  const first = versions[0]
  const last = versions[versions.length - 1]
  const quote = (text) => JSON.stringify(text)
  return [
    `// Generated by scripts/generate-packet-ids.mjs from minecraft-data ${mcDataVersion} (versions of minecraft-protocol ${mcProtocolVersion}).`,
    "// Do not edit: regenerate with `node scripts/generate-packet-ids.mjs`; test/protocol/packetIds.test.ts fails when it is stale.",
    "",
    interfaceSource(versions),
    "",
    ...constants.flatMap((constant) => [constant, ""]),
    "/** Every protocol number covered, the release names that speak it, and its table. */",
    "export const PROTOCOL_TABLE: ReadonlyArray<{ readonly protocol: number; readonly names: ReadonlyArray<string>; readonly ids: PacketIds }> = [",
    ...versions.map(
      (v, i) => `  { protocol: ${v.protocol}, names: [${v.names.map(quote).join(", ")}], ids: ${v.constant} }${i === versions.length - 1 ? "" : ","}`
    ),
    "]",
    "",
    "/** The range named in the disconnect a player on an unknown version gets. */",
    "export const SUPPORTED_RANGE = {",
    `  minProtocol: ${first.protocol},`,
    `  maxProtocol: ${last.protocol},`,
    `  minVersion: ${quote(first.names[0])},`,
    `  maxVersion: ${quote(last.names[last.names.length - 1])}`,
    "} as const",
    ""
  ].join("\n")
}

const isMain = process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)
if (isMain) {
  const source = generatePacketIdsSource()
  if (process.argv.includes("--stdout")) process.stdout.write(source)
  else {
    writeFileSync(OUTPUT, source)
    console.log(`wrote ${OUTPUT}`)
  }
}
