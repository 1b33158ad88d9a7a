/**
 * Chat text as the protocol carries it: JSON components (with `§` codes kept in the text), and from 1.20.3
 * (protocol 765) network NBT in configuration and play (login-state disconnects stay JSON in every version).
 */
import { decodeNetworkNbt, encodeNetworkNbt, type NbtInput } from "./nbt.js"
import { PacketReader } from "./PacketReader.js"
import { PacketWriter } from "./PacketWriter.js"
import { ProtocolError } from "./ProtocolError.js"
import { PV_1_20_3 } from "./versions.js"

export type TextComponent = string | { readonly text: string; readonly [key: string]: unknown }

/** The JSON text of a component; a plain string becomes `{"text": ...}` so every client version accepts it. */
export const textComponentJson = (component: TextComponent): string =>
  JSON.stringify(typeof component === "string" ? { text: component } : component)

/** Components nested deeper than this are cut off: text from a peer must not recurse without bound. */
const MAX_DEPTH = 64

/** A field of a component read as JSON gives it, whatever it is. */
const field = (node: object, key: string): unknown => (key in node ? Reflect.get(node, key) : undefined)

/** The component's own text: `text`, else `translate`. */
const ownText = (node: object): string => {
  const text = field(node, "text")
  if (typeof text === "string") return text
  const translate = field(node, "translate")
  return typeof translate === "string" ? translate : ""
}

/** Plain text of a component or legacy string: `§` codes removed (for legacy pings and logs). */
export const plainText = (component: unknown, depth = 0): string => {
  if (typeof component === "string") return component.replace(/§./g, "")
  if (component === null || typeof component !== "object" || depth > MAX_DEPTH) return ""
  let out = ownText(component)
  const extra = field(component, "extra")
  if (Array.isArray(extra)) for (const child of extra) out += plainText(child, depth + 1)
  return out.replace(/§./g, "")
}

const LEGACY_COLORS: Record<string, string> = {
  black: "0", dark_blue: "1", dark_green: "2", dark_aqua: "3", dark_red: "4", dark_purple: "5", gold: "6", gray: "7",
  dark_gray: "8", blue: "9", green: "a", aqua: "b", red: "c", light_purple: "d", yellow: "e", white: "f"
}

/** A component flattened to the `§`-coded string that pre-1.7 clients render. */
export const legacyText = (component: unknown, depth = 0): string => {
  if (typeof component === "string") return component
  if (component === null || typeof component !== "object" || depth > MAX_DEPTH) return ""
  let out = ""
  const colorName = field(component, "color")
  const color = typeof colorName === "string" && Object.hasOwn(LEGACY_COLORS, colorName) ? LEGACY_COLORS[colorName] : undefined
  if (color !== undefined) out += `§${color}`
  if (field(component, "bold") === true) out += "§l"
  if (field(component, "italic") === true) out += "§o"
  if (field(component, "underlined") === true) out += "§n"
  if (field(component, "strikethrough") === true) out += "§m"
  if (field(component, "obfuscated") === true) out += "§k"
  out += ownText(component)
  const extra = field(component, "extra")
  if (Array.isArray(extra)) for (const child of extra) out += legacyText(child, depth + 1)
  return out
}

/** First protocol whose configuration and play packets carry text as NBT (1.20.3). */
export const NBT_TEXT_PROTOCOL = PV_1_20_3
/** Longest JSON text a client accepts in a packet (vanilla's limit for chat components). */
export const MAX_TEXT_JSON_CHARS = 262_144

/** Strings inside `extra` and `with` become `{text}` compounds, so NBT lists stay of one type. */
const normaliseForNbt = (component: unknown): NbtInput => {
  if (typeof component === "string") return { text: component }
  if (component === null || typeof component !== "object" || Array.isArray(component)) return { text: String(component) }
  const out: Record<string, NbtInput> = {}
  for (const [key, value] of Object.entries(component as Record<string, unknown>)) {
    if (value === null || value === undefined) continue
    if ((key === "extra" || key === "with") && Array.isArray(value)) out[key] = value.map(normaliseForNbt)
    else out[key] = toNbtInput(value)
  }
  return out
}

const toNbtInput = (value: unknown): NbtInput => {
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return value
  if (Array.isArray(value)) return value.map(toNbtInput)
  if (value !== null && typeof value === "object") return normaliseForNbt(value)
  return String(value)
}

/** The network NBT of a component (a plain string becomes `{text: ...}`, as in the JSON form). */
export const textComponentNbt = (component: TextComponent): Buffer => encodeNetworkNbt(normaliseForNbt(component))

/** A text field of a configuration or play packet, in the form of the client's version: JSON string or NBT. */
export const encodeTextField = (component: TextComponent, protocolVersion: number): Buffer =>
  protocolVersion >= NBT_TEXT_PROTOCOL
    ? textComponentNbt(component)
    : new PacketWriter().string(textComponentJson(component)).body()

/**
 * Reads a text field written by `encodeTextField` (or a backend) at the reader's position: the parsed JSON (or the
 * raw string when it is not JSON) before 765, the decoded NBT from 765. Throws ProtocolError (run inside `decoding`).
 */
export const readTextField = (reader: PacketReader, protocolVersion: number): unknown => {
  if (protocolVersion < NBT_TEXT_PROTOCOL) {
    const json = reader.string(MAX_TEXT_JSON_CHARS, "text component")
    try {
      return JSON.parse(json) as unknown
    } catch {
      return json
    }
  }
  const read = decodeNetworkNbt(reader.buffer.subarray(0, reader.end), reader.offset)
  if (read._tag === "Invalid") throw new ProtocolError({ reason: read.reason })
  reader.offset += read.size
  return read.value
}
