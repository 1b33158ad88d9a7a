// Portal's web UI: sign in with the API key, then the dashboard, servers, players, bans and the live event log.
// Plain ES modules served by Portal itself; nothing is fetched from anywhere else.
import { call, followEvents, session } from "./api.js"
import * as bans from "./bans.js"
import * as dashboard from "./dashboard.js"
import { clear, fill, h } from "./dom.js"
import * as events from "./events.js"
import { live, record, reset, setConnected, subscribe } from "./live.js"
import * as players from "./players.js"
import * as servers from "./servers.js"

const VIEWS = { dashboard, servers, players, bans, events }
const main = document.querySelector("main")
const header = document.querySelector("header.top")
const liveStatus = header.querySelector(".live")
let cleanup
let stream
/** The view on the page, once one is. */
let shown

function signInView(message) {
  header.hidden = true
  const key = h("input", { id: "api-key", name: "key", type: "password", required: true, autocomplete: "current-password", spellcheck: false })
  const error = h("p", { class: "error", role: "alert" }, message ?? "")
  const submit = async (event) => {
    event.preventDefault()
    error.textContent = ""
    try {
      await call("GET", "/proxy", { key: key.value.trim() })
      session.signIn(key.value.trim())
      start()
    } catch (failure) {
      error.textContent = failure.status === 401 ? "That key was not accepted." : failure.message
      key.select()
    }
  }
  fill(main, 
    h(
      "form",
      { class: "signin", onsubmit: submit },
      h("h1", {}, "Portal"),
      h("p", {}, "Sign in with the admin API key: ", h("code", {}, "[web].api_key"), " in proxy.toml, or the key for this run in Portal's log when none is set."),
      h("div", { class: "field" }, h("label", { for: "api-key" }, "API key"), key),
      error,
      h("button", { type: "submit", class: "primary" }, "Sign in"),
      h("p", { class: "muted small" }, "The key is kept in this tab only, until it closes.")
    )
  )
  key.focus()
}

function route() {
  if (session.key() === null) return signInView()
  // Only `#/<view>` names a view: another hash (the skip link's `#main`) leaves the page as it is.
  if (location.hash !== "" && !location.hash.startsWith("#/") && shown !== undefined) return
  const asked = location.hash.replace(/^#\//, "") || "dashboard"
  const name = Object.hasOwn(VIEWS, asked) ? asked : "dashboard"
  const view = VIEWS[name]
  cleanup?.()
  clear(main)
  for (const link of header.querySelectorAll("nav a")) {
    if (link.getAttribute("href") === `#/${name}`) link.setAttribute("aria-current", "page")
    else link.removeAttribute("aria-current")
  }
  cleanup = view.render(main)
  shown = name
  main.querySelector("h1")?.focus()
}

function showConnection() {
  liveStatus.textContent = live.connected ? "● live" : "○ reconnecting"
  liveStatus.className = live.connected ? "live on" : "live off"
}

function start() {
  header.hidden = false
  stream?.stop()
  reset()
  showConnection()
  stream = followEvents(record, setConnected)
  route()
}

session.whenSignedOut((reason) => {
  stream?.stop()
  stream = undefined
  cleanup?.()
  cleanup = undefined
  shown = undefined
  signInView(reason)
})
subscribe((event) => {
  if (event.type === "connection") showConnection()
})
header.querySelector(".signout").addEventListener("click", () => session.signOut())
window.addEventListener("hashchange", () => session.key() !== null && route())

if (session.key() === null) signInView()
else start()
