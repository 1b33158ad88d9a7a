// What the event stream has brought since sign-in: the event log and the stats history the dashboard draws.

const MAX_EVENTS = 300
/** Stats ticks kept: one every 2 s, so ten minutes. */
const MAX_STATS = 300

export const live = {
  connected: false,
  events: [],
  stats: [],
  listeners: new Set()
}

export function subscribe(listener) {
  live.listeners.add(listener)
  return () => live.listeners.delete(listener)
}

function notify(event) {
  for (const listener of [...live.listeners]) listener(event)
}

export function record(event) {
  event.receivedAt = Date.now()
  if (event.type === "stats") {
    live.stats.push(event.data)
    if (live.stats.length > MAX_STATS) live.stats.shift()
  } else {
    live.events.unshift(event)
    if (live.events.length > MAX_EVENTS) live.events.pop()
  }
  notify(event)
}

export function setConnected(connected) {
  live.connected = connected
  notify({ type: "connection", data: connected })
}

export function reset() {
  live.events.length = 0
  live.stats.length = 0
  live.connected = false
}

/** Calls `f` at most once per `ms` (the last call wins), so bursts of events cost one request. */
export function throttle(f, ms) {
  let timer
  return () => {
    if (timer !== undefined) return
    timer = setTimeout(() => {
      timer = undefined
      f()
    }, ms)
  }
}

/** One line saying what an event was about. */
export function describe(event) {
  const d = event.data ?? {}
  switch (event.type) {
    case "player.join":
      return `${d.name ?? d.address} joined ${d.server} (via ${d.backend})`
    case "player.leave":
      return `${d.name ?? d.address} left ${d.server}`
    case "server.state":
      return `${d.server}: ${d.from} → ${d.to}${d.reason ? ` (${d.reason})` : ""}`
    case "backend.health":
      return `${d.server} ${d.address} is ${d.healthy ? "up" : `down${d.reason ? ` (${d.reason})` : ""}`}`
    case "ban.created":
      return `banned ${d.target?.type} ${d.target?.value}${d.reason ? `: ${d.reason}` : ""}`
    case "ban.removed":
      return `ban lifted: ${d.target?.type} ${d.target?.value}`
    case "config.reload":
      return `configuration revision ${d.revision}${d.added?.length ? `, added ${d.added.join(", ")}` : ""}${d.removed?.length ? `, removed ${d.removed.join(", ")}` : ""}`
    default:
      return event.type
  }
}
