/** Chat text as the protocol carries it: JSON components, with `§` codes kept in the text. */

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
