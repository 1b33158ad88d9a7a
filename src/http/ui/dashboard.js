// Dashboard: players online, servers by state, logins and traffic over the last minutes (from the live stream),
// uptime, and the configured features that are not active.
import { api } from "./api.js"
import { badge, fill, formatBytes, formatDuration, h, svg } from "./dom.js"
import { live, subscribe, throttle } from "./live.js"

const STATES = ["online", "starting", "sleeping", "stopping", "crashed", "offline", "unreachable"]

/** A line chart of `series` ([{ label, values, className }]) over the same time axis. */
function chart(title, series, format) {
  const width = 600
  const height = 140
  const count = Math.max(2, ...series.map((s) => s.values.length))
  const peak = Math.max(0, ...series.flatMap((s) => s.values))
  const max = peak > 0 ? peak * 1.1 : 1
  const x = (i) => (i / (count - 1)) * width
  const y = (v) => height - 4 - (v / max) * (height - 12)
  const latest = series.map((s) => `${s.label} ${format(s.values.at(-1) ?? 0)}`).join(", ")
  const points = (s) => s.values.map((v, i) => [x(i + count - s.values.length), y(v)])
  return h(
    "figure",
    { class: "chart" },
    h("figcaption", {}, h("strong", {}, title), " ", h("span", { class: "muted" }, `now: ${latest}; peak ${format(peak)}`)),
    svg(
      "svg",
      { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${title}: ${latest}`, preserveAspectRatio: "none" },
      svg("line", { x1: 0, y1: height - 4, x2: width, y2: height - 4, class: "axis" }),
      ...series.map((s) => svg("polyline", { class: `series ${s.className}`, points: points(s).map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ") })),
      // The latest value as a mark, so that a series of one point shows too.
      ...series.flatMap((s) => {
        const last = points(s).at(-1)
        return last === undefined ? [] : [svg("rect", { class: `mark ${s.className}`, x: (last[0] - 4).toFixed(1), y: (last[1] - 3).toFixed(1), width: 6, height: 6 })]
      })
    ),
    h("p", { class: "legend" }, series.map((s) => h("span", { class: `key ${s.className}` }, s.label)))
  )
}

/** Per-second rates between consecutive stats ticks. */
function rates(pick) {
  const out = []
  for (let i = 1; i < live.stats.length; i++) {
    const a = live.stats[i - 1]
    const b = live.stats[i]
    const seconds = (Date.parse(b.at) - Date.parse(a.at)) / 1000
    out.push(seconds > 0 ? Math.max(0, pick(b) - pick(a)) / seconds : 0)
  }
  return out
}

export function render(container) {
  let info
  let servers = []
  const body = h("div", { class: "dashboard" }, h("p", { class: "muted" }, "Loading…"))
  container.append(h("h1", { tabindex: -1 }, "Dashboard"), body)

  /** Why the last load failed (shown above the cards until a load succeeds; the stats tick redraws them). */
  let failure
  const draw = () => {
    const stats = live.stats.at(-1)
    const players = stats?.players_online ?? info?.players_online ?? 0
    const uptime = stats?.uptime_seconds ?? info?.uptime_seconds ?? 0
    const byState = new Map()
    for (const server of servers) byState.set(server.state, (byState.get(server.state) ?? 0) + 1)
    fill(body, 
      failure === undefined ? null : h("p", { class: "error", role: "alert" }, `${failure} (trying again)`),
      h(
        "section",
        { class: "cards", "aria-label": "Summary" },
        h("div", { class: "card" }, h("span", { class: "label" }, "Players online"), h("span", { class: "value", "data-testid": "players-online" }, players)),
        h("div", { class: "card" }, h("span", { class: "label" }, "Servers"), h("span", { class: "value" }, servers.length)),
        h("div", { class: "card" }, h("span", { class: "label" }, "Connections open"), h("span", { class: "value" }, stats?.connections.active ?? "–")),
        h("div", { class: "card" }, h("span", { class: "label" }, "Uptime"), h("span", { class: "value" }, formatDuration(uptime)))
      ),
      h(
        "section",
        { "aria-labelledby": "by-state" },
        h("h2", { id: "by-state" }, "Servers by state"),
        servers.length === 0
          ? h("p", { class: "muted" }, "No servers configured.")
          : h("ul", { class: "states" }, STATES.filter((state) => byState.has(state)).map((state) => h("li", {}, badge(state), " ", byState.get(state))))
      ),
      h(
        "section",
        { class: "charts", "aria-labelledby": "activity" },
        h("h2", { id: "activity" }, "Activity"),
        live.stats.length < 2
          ? h("p", { class: "muted" }, "Collecting: the charts fill in from the live stream (a point every 2 s).")
          : [
              chart("Logins per second", [{ label: "logins", values: rates((s) => s.logins.total), className: "logins" }], (v) => v.toFixed(2)),
              chart(
                "Traffic",
                [
                  { label: "in", values: rates((s) => s.bytes.in), className: "in" },
                  { label: "out", values: rates((s) => s.bytes.out), className: "out" }
                ],
                (v) => `${formatBytes(v)}/s`
              )
            ]
      ),
      h(
        "section",
        { "aria-labelledby": "inactive" },
        h("h2", { id: "inactive" }, "Configured but not active"),
        info === undefined || info.features.inactive.length === 0
          ? h("p", { class: "muted" }, info === undefined ? "Loading…" : "Everything configured is active.")
          : h("ul", {}, info.features.inactive.map((feature) => h("li", {}, h("code", {}, feature.where), ": ", feature.what)))
      ),
      info === undefined ? null : h("p", { class: "muted" }, `Portal ${info.version}, game connections on ${info.bind}, started ${new Date(info.started_at).toLocaleString()}.`)
    )
  }

  let retry
  const load = async () => {
    try {
      ;[info, servers] = await Promise.all([api.get("/proxy"), api.get("/servers")])
      failure = undefined
    } catch (error) {
      // Shown, not taken for an empty configuration; tried again (a rate limit passes, a restart ends).
      failure = error.message
      retry = setTimeout(load, 5000)
    }
    draw()
  }
  const reloadServers = throttle(async () => {
    servers = await api.get("/servers").catch(() => servers)
    draw()
  }, 2000)
  load()
  const stop = subscribe((event) => {
    if (event.type === "stats") draw()
    else if (event.type === "server.state" || event.type === "config.reload") reloadServers()
  })
  return () => {
    clearTimeout(retry)
    stop()
  }
}
