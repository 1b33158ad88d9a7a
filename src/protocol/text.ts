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

/**
 * A component's children, in order: its `extra`; an array component is its first element with the rest as extra
 * (as the client reads it), so `["", {"text": "a", "color": "red"}, "b"]` is a text.
 */
const childrenOf = (component: object): ReadonlyArray<unknown> => {
  if (Array.isArray(component)) return component.slice(1)
  const extra = field(component, "extra")
  return Array.isArray(extra) ? extra : []
}

/** The node whose own text and style an array component has: its first element. */
const headOf = (component: object): unknown => (Array.isArray(component) ? component[0] : component)

/** Plain text of a component or legacy string: `§` codes removed (for legacy pings and logs). */
export const plainText = (component: unknown, depth = 0): string => {
  if (typeof component === "string") return component.replace(/§./g, "")
  if (component === null || typeof component !== "object" || depth > MAX_DEPTH) return ""
  const head = headOf(component)
  let out = head !== component ? plainText(head, depth + 1) : ownText(component)
  for (const child of childrenOf(component)) out += plainText(child, depth + 1)
  return out.replace(/§./g, "")
}

const LEGACY_COLORS: Record<string, string> = {
  black: "0", dark_blue: "1", dark_green: "2", dark_aqua: "3", dark_red: "4", dark_purple: "5", gold: "6", gray: "7",
  dark_gray: "8", blue: "9", green: "a", aqua: "b", red: "c", light_purple: "d", yellow: "e", white: "f"
}

/** The formats a legacy client knows, with their codes, in the order they are written. */
const LEGACY_FORMATS = [
  ["bold", "l"],
  ["italic", "o"],
  ["underlined", "n"],
  ["strikethrough", "m"],
  ["obfuscated", "k"]
] as const

/** A segment's style: its legacy colour code, and the codes of the formats on. */
interface Style {
  readonly color: string | undefined
  readonly formats: ReadonlySet<string>
}

/** The style of `node` on top of the one it inherits: a colour or format it sets replaces the inherited one. */
const styleOf = (node: object, inherited: Style): Style => {
  const colorName = field(node, "color")
  const color = typeof colorName === "string" && Object.hasOwn(LEGACY_COLORS, colorName) ? LEGACY_COLORS[colorName] : inherited.color
  const formats = new Set(inherited.formats)
  for (const [key, code] of LEGACY_FORMATS) {
    const value = field(node, key)
    if (value === true) formats.add(code)
    else if (value === false) formats.delete(code)
  }
  return { color, formats }
}

/** A style as `§` codes: the colour (which resets formats on a legacy client), then the formats on. */
const codesOf = (style: Style): string =>
  (style.color === undefined ? "" : `§${style.color}`) + LEGACY_FORMATS.filter(([, code]) => style.formats.has(code)).map(([, code]) => `§${code}`).join("")

/**
 * A component flattened to the `§`-coded string that pre-1.7 clients render. Children inherit their parent's style
 * and a sibling does not inherit another's: each segment whose style differs from the one before it starts with
 * `§r` (where it has no colour to reset with) and its own codes.
 */
export const legacyText = (component: unknown): string => {
  let out = ""
  let current = ""
  const emit = (text: string, style: Style) => {
    if (text.length === 0) return
    const codes = codesOf(style)
    if (codes !== current) {
      // Only the codes added, where the new style is the current one and more; else its colour (which resets the
      // formats), or §r where it has none.
      if (current.length > 0 && codes.startsWith(current)) out += codes.slice(current.length)
      else out += style.color !== undefined ? codes : `§r${codes}`
      current = codes
    }
    out += text
  }
  const walk = (node: unknown, inherited: Style, depth: number): void => {
    if (typeof node === "string") return emit(node, inherited)
    if (node === null || typeof node !== "object" || depth > MAX_DEPTH) return
    const head = headOf(node)
    if (head !== node) {
      walk(head, inherited, depth + 1)
      // An array's later elements take its first element's style, as extras do their parent's.
      const style = head !== null && typeof head === "object" && !Array.isArray(head) ? styleOf(head, inherited) : inherited
      for (const child of childrenOf(node)) walk(child, style, depth + 1)
      return
    }
    const style = styleOf(node, inherited)
    emit(ownText(node), style)
    for (const child of childrenOf(node)) walk(child, style, depth + 1)
  }
  walk(component, { color: undefined, formats: new Set() }, 0)
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
