// Small DOM helpers: elements are built with text nodes only, so nothing from the API is ever parsed as HTML.

/** h("button", { class: "x", onclick: f }, "text", child) */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null) continue
    if (value === false) {
      if (typeof element[name] === "boolean") element[name] = false
      continue
    }
    if (name.startsWith("on") && typeof value === "function") element.addEventListener(name.slice(2), value)
    else if (name === "class") element.className = value
    else if (name in element && name !== "list" && typeof value !== "string") element[name] = value
    else element.setAttribute(name, value === true ? "" : String(value))
  }
  append(element, children)
  return element
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue
    element.append(child instanceof Node ? child : document.createTextNode(String(child)))
  }
}

const SVG = "http://www.w3.org/2000/svg"

export function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG, tag)
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value))
  append(element, children)
  return element
}

export function clear(element) {
  while (element.firstChild) element.firstChild.remove()
  return element
}

/** What names a control for a keyboard user: its label, else its text. */
const nameOf = (control) => control.getAttribute("aria-label") ?? control.textContent

/**
 * Replaces what `element` holds with `children` (nested arrays flattened, empty ones skipped). Where the focus was
 * inside it (a list refreshed after a kick, a ban, a save), it goes to the control of the same name in the new
 * content, else to the page's heading: not back to the start of the page.
 */
export function fill(element, ...children) {
  const focused = document.activeElement
  const had = focused !== null && focused !== element && element.contains(focused) ? nameOf(focused) : undefined
  append(clear(element), children)
  if (had !== undefined) {
    const same = [...element.querySelectorAll("button, a[href], input, select, textarea")].find((control) => nameOf(control) === had)
    ;(same ?? document.querySelector("main h1"))?.focus()
  }
  return element
}

export function formatBytes(bytes) {
  if (bytes < 1024) return `${Math.round(bytes)} B`
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`
  if (bytes < 1024 ** 3) return `${(bytes / 1024 / 1024).toFixed(1)} MiB`
  return `${(bytes / 1024 ** 3).toFixed(2)} GiB`
}

export function formatDuration(seconds) {
  const s = Math.max(0, Math.floor(seconds))
  const d = Math.floor(s / 86400)
  const hh = Math.floor((s % 86400) / 3600)
  const mm = Math.floor((s % 3600) / 60)
  if (d > 0) return `${d}d ${hh}h`
  if (hh > 0) return `${hh}h ${mm}m`
  if (mm > 0) return `${mm}m ${s % 60}s`
  return `${s}s`
}

export function formatTime(value) {
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value)
  return date.toLocaleString()
}

/** A state badge: the word itself, coloured by CSS. */
export function badge(state) {
  return h("span", { class: `badge state-${state}` }, state)
}
