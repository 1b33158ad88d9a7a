// Servers: state, start and stop, addresses with health, players; the TOML of each with the problems the checks find
// shown beside it; create and delete.
import { api, ApiError, call } from "./api.js"
import { badge, clear, fill, h } from "./dom.js"
import { subscribe, throttle } from "./live.js"

const TEMPLATE = `domains = ["play.example.com"]
addresses = ["127.0.0.1:25566"]
proxy_mode = "passthrough"
`

function problemList(problems) {
  return h(
    "ul",
    { class: "problems" },
    problems.map((problem) => {
      // A TOML syntax error has no key path; where it is comes as `file:line:column`.
      const at = problem.path ? problem.path : /:\d+:\d+$/.test(problem.file ?? "") ? `line ${problem.file.split(":").slice(-2).join(", column ")}` : ""
      return h("li", {}, at ? h("code", {}, at) : null, at ? ": " : "", problem.message)
    })
  )
}

export function render(container) {
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" })
  const list = h("div", {}, h("p", { class: "muted" }, "Loading…"))
  const editorSlot = h("div")
  container.append(
    h("div", { class: "heading" }, h("h1", { tabindex: -1 }, "Servers"), h("button", { type: "button", onclick: () => openEditor(undefined) }, "New server")),
    status,
    editorSlot,
    list
  )

  const say = (text, error = false) => {
    status.className = error ? "status error" : "status"
    status.textContent = text
  }

  const command = async (id, which) => {
    try {
      const result = await api.post(`/servers/${encodeURIComponent(id)}/${which}`)
      say(result.begun ? `${id}: ${which === "start" ? "starting" : "stopping"}` : `${id} is ${result.state}: nothing to ${which}`)
      load()
    } catch (error) {
      say(error.message, true)
    }
  }

  const remove = async (id) => {
    if (!window.confirm(`Delete the file of server ${id}? Players can no longer reach it.`)) return
    try {
      await api.del(`/servers/${encodeURIComponent(id)}`)
      say(`${id} deleted`)
      load()
    } catch (error) {
      say(error.message, true)
    }
  }

  const openEditor = async (id) => {
    let text = TEMPLATE
    if (id !== undefined) {
      try {
        text = await api.get(`/servers/${encodeURIComponent(id)}/config`)
      } catch (error) {
        return say(error.message, true)
      }
    }
    const idInput = h("input", { id: "server-id", name: "id", required: true, pattern: "[a-z0-9_\\-]+", value: id ?? "", readOnly: id !== undefined, autocomplete: "off" })
    const textarea = h("textarea", { id: "server-toml", name: "toml", rows: 16, spellcheck: false, "aria-describedby": "server-problems" })
    textarea.value = text
    const problems = h("div", { id: "server-problems", class: "problems-box", "aria-live": "polite" }, h("p", { class: "muted" }, "Check or save to see problems here."))
    const showProblems = (found) => {
      fill(problems, 
        found.length === 0 ? h("p", { class: "ok" }, "No problems.") : [h("p", { class: "error", role: "alert" }, `${found.length} problem(s):`), problemList(found)]
      )
    }
    /** A new server must not take an existing one's id: its file would be replaced. */
    const taken = async () => {
      if (id !== undefined || idInput.value === "") return false
      try {
        await api.get(`/servers/${encodeURIComponent(idInput.value)}`)
        return true
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) return false
        throw error
      }
    }
    const takenProblem = () => ({ path: "", message: `a server "${idInput.value}" exists already: choose another id, or edit that server` })
    const check = async () => {
      try {
        if (await taken()) return showProblems([takenProblem()])
        const query = idInput.value === "" ? "" : `?id=${encodeURIComponent(idInput.value)}`
        const checked = await call("POST", `/servers/validate${query}`, { text: textarea.value })
        showProblems(checked.problems)
      } catch (error) {
        fill(problems, h("p", { class: "error", role: "alert" }, error.message))
      }
    }
    const save = async (event) => {
      event.preventDefault()
      if (!idInput.reportValidity()) return
      try {
        if (await taken()) return showProblems([takenProblem()])
        const result = await api.put(`/servers/${encodeURIComponent(idInput.value)}`, textarea.value)
        showProblems([])
        say(`${result.id} ${result.created ? "created" : "saved"}${result.applied ? "" : " (not applied yet)"}`)
        clear(editorSlot)
        load()
      } catch (error) {
        if (error instanceof ApiError && error.details?.problems) showProblems(error.details.problems)
        else fill(problems, h("p", { class: "error", role: "alert" }, error.message))
      }
    }
    fill(editorSlot, 
      h(
        "form",
        { class: "editor", onsubmit: save, "aria-label": id === undefined ? "New server" : `Edit ${id}` },
        h("h2", {}, id === undefined ? "New server" : `Edit ${id}`),
        h("div", { class: "field" }, h("label", { for: "server-id" }, "Id (file name without .toml)"), idInput),
        h(
          "div",
          { class: "split" },
          h("div", { class: "field" }, h("label", { for: "server-toml" }, "Server file (TOML)"), textarea),
          h("aside", { "aria-label": "Problems" }, h("h3", {}, "Problems"), problems)
        ),
        h(
          "div",
          { class: "actions" },
          h("button", { type: "submit", class: "primary" }, "Save"),
          h("button", { type: "button", onclick: check }, "Check"),
          h("button", { type: "button", onclick: () => clear(editorSlot) }, "Cancel")
        )
      )
    )
    ;(id === undefined ? idInput : textarea).focus()
  }

  const load = async () => {
    let servers
    try {
      servers = await api.get("/servers")
    } catch (error) {
      return say(error.message, true)
    }
    fill(list, 
      servers.length === 0
        ? h("p", { class: "muted" }, "No servers yet.")
        : h(
            "table",
            {},
            h("caption", { class: "visually-hidden" }, "Servers"),
            h("thead", {}, h("tr", {}, ["Server", "State", "Players", "Mode", "Addresses", "Actions"].map((title) => h("th", { scope: "col" }, title)))),
            h(
              "tbody",
              {},
              servers.map((server) =>
                h(
                  "tr",
                  { "data-server": server.id },
                  h("th", { scope: "row" }, h("strong", {}, server.id), h("div", { class: "muted" }, server.domains.join(", ") || "(no domains)")),
                  h("td", {}, badge(server.state), server.state_reason ? h("div", { class: "muted small" }, server.state_reason) : null),
                  h("td", {}, server.max_players > 0 ? `${server.players} / ${server.max_players}` : String(server.players)),
                  h("td", {}, server.proxy_mode),
                  h(
                    "td",
                    {},
                    h(
                      "ul",
                      { class: "addresses" },
                      server.addresses.map((address) =>
                        h(
                          "li",
                          {},
                          h("span", { class: `dot ${address.healthy && !address.ejected ? "up" : "down"}`, title: address.healthy ? "healthy" : "failing" }),
                          h("code", {}, address.address),
                          h("span", { class: "muted small" }, ` weight ${address.weight}, ${address.active} active${address.healthy ? "" : ", failing health checks"}${address.ejected ? ", ejected" : ""}`)
                        )
                      )
                    )
                  ),
                  h(
                    "td",
                    { class: "actions" },
                    server.managed ? h("button", { type: "button", onclick: () => command(server.id, "start") }, "Start") : null,
                    server.managed ? h("button", { type: "button", onclick: () => command(server.id, "stop") }, "Stop") : null,
                    h("button", { type: "button", onclick: () => openEditor(server.id), "aria-label": `Edit ${server.id}` }, "Edit"),
                    h("button", { type: "button", class: "danger", onclick: () => remove(server.id), "aria-label": `Delete ${server.id}` }, "Delete")
                  )
                )
              )
            )
          )
    )
  }

  load()
  const refresh = throttle(load, 1500)
  return subscribe((event) => {
    if (["server.state", "config.reload", "backend.health", "player.join", "player.leave"].includes(event.type)) refresh()
  })
}

