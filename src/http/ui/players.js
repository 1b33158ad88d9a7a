// Players: who is online where, search by name, kick with a reason.
import { api } from "./api.js"
import { fill, formatBytes, formatTime, h } from "./dom.js"
import { subscribe, throttle } from "./live.js"

export function render(container) {
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" })
  const search = h("input", { id: "player-search", type: "search", name: "q", placeholder: "Name or UUID", autocomplete: "off" })
  const server = h("select", { id: "player-server", name: "server" }, h("option", { value: "" }, "All servers"))
  const list = h("div", {}, h("p", { class: "muted" }, "Loading…"))
  const dialog = h("dialog", { class: "kick", "aria-labelledby": "kick-title" })
  container.append(
    h("h1", { tabindex: -1 }, "Players"),
    h(
      "form",
      { class: "filters", role: "search", onsubmit: (event) => (event.preventDefault(), load()) },
      h("div", { class: "field" }, h("label", { for: "player-search" }, "Search"), search),
      h("div", { class: "field" }, h("label", { for: "player-server" }, "Server"), server),
      h("button", { type: "submit" }, "Search")
    ),
    status,
    list,
    dialog
  )
  search.addEventListener("input", throttle(() => load(), 300))
  server.addEventListener("change", () => load())

  const kick = (player) => {
    const reason = h("input", { id: "kick-reason", name: "reason", value: "Kicked by an operator", maxlength: 256, required: true })
    const confirm = async (event) => {
      event.preventDefault()
      try {
        const result = await api.post(`/players/${encodeURIComponent(player.uuid ?? player.name)}/kick`, { reason: reason.value })
        status.className = "status"
        status.textContent = `Kicked ${player.name} (${result.kicked} session${result.kicked === 1 ? "" : "s"})`
        dialog.close()
        load()
      } catch (error) {
        status.className = "status error"
        status.textContent = error.message
        dialog.close()
      }
    }
    fill(dialog, 
      h(
        "form",
        { method: "dialog", onsubmit: confirm },
        h("h2", { id: "kick-title" }, `Kick ${player.name}`),
        h("div", { class: "field" }, h("label", { for: "kick-reason" }, "Reason shown to the player"), reason),
        h(
          "div",
          { class: "actions" },
          h("button", { type: "submit", class: "danger" }, "Kick"),
          h("button", { type: "button", onclick: () => dialog.close() }, "Cancel")
        )
      )
    )
    dialog.showModal()
    reason.select()
  }

  const load = async () => {
    const params = new URLSearchParams()
    if (search.value.trim() !== "") params.set("q", search.value.trim())
    if (server.value !== "") params.set("server", server.value)
    let players
    try {
      players = await api.get(`/players${params.size > 0 ? `?${params}` : ""}`)
    } catch (error) {
      status.className = "status error"
      status.textContent = error.message
      return
    }
    fill(list, 
      players.length === 0
        ? h("p", { class: "muted" }, search.value || server.value ? "No player matches." : "Nobody is online.")
        : h(
            "table",
            {},
            h("caption", { class: "visually-hidden" }, "Players online"),
            h("thead", {}, h("tr", {}, ["Player", "Server", "Address", "Version", "Since", "Traffic", ""].map((title) => h("th", { scope: "col" }, title)))),
            h(
              "tbody",
              {},
              players.map((player) =>
                h(
                  "tr",
                  { "data-player": player.name },
                  h("th", { scope: "row" }, h("strong", {}, player.name ?? "?"), h("div", { class: "muted small" }, player.uuid ?? "")),
                  h("td", {}, player.server, h("div", { class: "muted small" }, player.backend ?? "")),
                  h("td", {}, `${player.address}:${player.port}`),
                  h("td", {}, player.protocol_version),
                  h("td", {}, formatTime(player.since)),
                  h("td", {}, `↓ ${formatBytes(player.bytes_out)} ↑ ${formatBytes(player.bytes_in)}`),
                  h("td", {}, h("button", { type: "button", class: "danger", onclick: () => kick(player), "aria-label": `Kick ${player.name}` }, "Kick"))
                )
              )
            )
          )
    )
  }

  api.get("/servers").then((servers) => {
    for (const s of servers) server.append(h("option", { value: s.id }, s.id))
  }, () => {})
  load()
  const refresh = throttle(load, 1000)
  return subscribe((event) => {
    if (event.type === "player.join" || event.type === "player.leave") refresh()
  })
}
