// Bans: the bans in force, a form to add one (with a duration, or permanent), and lifting one.
import { api } from "./api.js"
import { fill, formatTime, h } from "./dom.js"
import { subscribe, throttle } from "./live.js"

export function render(container) {
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" })
  const type = h("select", { id: "ban-type", name: "type" }, h("option", { value: "username" }, "Player name"), h("option", { value: "uuid" }, "UUID"), h("option", { value: "ip" }, "IP address or range"))
  const value = h("input", { id: "ban-value", name: "value", required: true, autocomplete: "off" })
  const reason = h("input", { id: "ban-reason", name: "reason", maxlength: 256, autocomplete: "off" })
  const duration = h("input", { id: "ban-duration", name: "duration", placeholder: "e.g. 30m, 7d, 1h30m", autocomplete: "off" })
  const list = h("div", {}, h("p", { class: "muted" }, "Loading…"))
  const say = (text, error = false) => {
    status.className = error ? "status error" : "status"
    status.textContent = text
  }

  const add = async (event) => {
    event.preventDefault()
    const body = { target: { type: type.value, value: value.value.trim() }, reason: reason.value }
    if (duration.value.trim() !== "") body.duration = duration.value.trim()
    try {
      const ban = await api.post("/bans", body)
      say(`Banned ${ban.target.type} ${ban.target.value}${ban.expires_at === null ? " permanently" : ` until ${formatTime(ban.expires_at)}`}`)
      value.value = ""
      reason.value = ""
      duration.value = ""
      load()
    } catch (error) {
      say(error.message, true)
    }
  }

  const lift = async (ban) => {
    try {
      await api.del(`/bans/${ban.target.type}/${encodeURIComponent(ban.target.value)}`)
      say(`Lifted the ban of ${ban.target.type} ${ban.target.value}`)
      load()
    } catch (error) {
      say(error.message, true)
    }
  }

  container.append(
    h("h1", { tabindex: -1 }, "Bans"),
    h(
      "form",
      { class: "inline-form", onsubmit: add, "aria-label": "Add a ban" },
      h("div", { class: "field" }, h("label", { for: "ban-type" }, "Ban by"), type),
      h("div", { class: "field" }, h("label", { for: "ban-value" }, "Who"), value),
      h("div", { class: "field" }, h("label", { for: "ban-reason" }, "Reason"), reason),
      h("div", { class: "field" }, h("label", { for: "ban-duration" }, "Duration (empty: permanent)"), duration),
      h("button", { type: "submit", class: "primary" }, "Ban")
    ),
    status,
    list
  )

  const load = async () => {
    let bans
    try {
      bans = await api.get("/bans")
    } catch (error) {
      return say(error.message, true)
    }
    fill(list, 
      bans.length === 0
        ? h("p", { class: "muted" }, "No bans in force.")
        : h(
            "table",
            {},
            h("caption", { class: "visually-hidden" }, "Bans in force"),
            h("thead", {}, h("tr", {}, ["Target", "Reason", "Since", "Until", "By", ""].map((title) => h("th", { scope: "col" }, title)))),
            h(
              "tbody",
              {},
              bans.map((ban) =>
                h(
                  "tr",
                  { "data-ban": ban.target.value },
                  h("th", { scope: "row" }, h("span", { class: "muted small" }, ban.target.type), " ", h("code", {}, ban.target.value)),
                  h("td", {}, ban.reason || "–"),
                  h("td", {}, formatTime(ban.created_at)),
                  h("td", {}, ban.expires_at === null ? "permanent" : formatTime(ban.expires_at)),
                  h("td", {}, ban.source),
                  h("td", {}, h("button", { type: "button", onclick: () => lift(ban), "aria-label": `Lift the ban of ${ban.target.value}` }, "Remove"))
                )
              )
            )
          )
    )
  }
  load()
  const refresh = throttle(load, 1000)
  return subscribe((event) => {
    if (event.type === "ban.created" || event.type === "ban.removed") refresh()
  })
}
