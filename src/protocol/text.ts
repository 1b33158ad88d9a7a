/** Chat text as the protocol carries it: JSON components, with `§` codes kept in the text. */

export type TextComponent = string | { readonly text: string; readonly [key: string]: unknown }

/** The JSON text of a component; a plain string becomes `{"text": ...}` so every client version accepts it. */
export const textComponentJson = (component: TextComponent): string =>
  JSON.stringify(typeof component === "string" ? { text: component } : component)

/** Plain text of a component or legacy string: `§` codes removed (for legacy pings and logs). */
export const plainText = (component: unknown): string => {
  if (typeof component === "string") return component.replace(/§./g, "")
  if (component === null || typeof component !== "object") return ""
  const node = component as { text?: unknown; translate?: unknown; extra?: unknown }
  let out = typeof node.text === "string" ? node.text : typeof node.translate === "string" ? node.translate : ""
  if (Array.isArray(node.extra)) for (const child of node.extra) out += plainText(child)
  return out.replace(/§./g, "")
}

const LEGACY_COLORS: Record<string, string> = {
  black: "0", dark_blue: "1", dark_green: "2", dark_aqua: "3", dark_red: "4", dark_purple: "5", gold: "6", gray: "7",
  dark_gray: "8", blue: "9", green: "a", aqua: "b", red: "c", light_purple: "d", yellow: "e", white: "f"
}

/** A component flattened to the `§`-coded string that pre-1.7 clients render. */
export const legacyText = (component: unknown): string => {
  if (typeof component === "string") return component
  if (component === null || typeof component !== "object") return ""
  const node = component as Record<string, unknown>
  let out = ""
  const color = typeof node.color === "string" ? LEGACY_COLORS[node.color] : undefined
  if (color !== undefined) out += `§${color}`
  if (node.bold === true) out += "§l"
  if (node.italic === true) out += "§o"
  if (node.underlined === true) out += "§n"
  if (node.strikethrough === true) out += "§m"
  if (node.obfuscated === true) out += "§k"
  out += typeof node.text === "string" ? node.text : typeof node.translate === "string" ? node.translate : ""
  if (Array.isArray(node.extra)) for (const child of node.extra) out += legacyText(child)
  return out
}
