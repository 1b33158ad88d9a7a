// The admin API from the browser: the key lives in sessionStorage (this tab, until it closes) and travels only in
// the Authorization header, the event stream included (read with fetch, not EventSource, which cannot send it).

const KEY = "portal.apiKey"
const BASE = "/api/v1"

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`)
    this.status = status
    this.code = body?.error?.code ?? "http_error"
    this.details = body?.error?.details
  }
}

let onSignedOut = (_reason) => {}

/** Why the UI signs out by itself: the key in use is refused (changed in proxy.toml, or a new key for this run). */
const KEY_REFUSED = "Portal no longer accepts the key this tab signed in with (it was changed, or Portal restarted with a key for the run): sign in with the current key."

export const session = {
  key: () => sessionStorage.getItem(KEY),
  signIn: (key) => sessionStorage.setItem(KEY, key),
  /** `reason`: what the sign-in form says (the user signed out, or the key stopped being accepted). */
  signOut: (reason = "Signed out.") => {
    sessionStorage.removeItem(KEY)
    onSignedOut(reason)
  },
  whenSignedOut: (f) => {
    onSignedOut = f
  }
}

/** One request; JSON in and out unless `text` is given (TOML) or the answer is not JSON. */
export async function call(method, path, { json, text, key = session.key() } = {}) {
  const headers = { authorization: `Bearer ${key ?? ""}` }
  let body
  if (json !== undefined) {
    headers["content-type"] = "application/json"
    body = JSON.stringify(json)
  } else if (text !== undefined) {
    headers["content-type"] = "application/toml"
    body = text
  }
  const response = await fetch(`${BASE}${path}`, { method, headers, body })
  const type = response.headers.get("content-type") ?? ""
  const payload = response.status === 204 ? undefined : type.includes("json") ? await response.json() : await response.text()
  if (!response.ok) {
    const error = new ApiError(response.status, typeof payload === "object" ? payload : undefined)
    if (response.status === 401 && key === session.key()) session.signOut(KEY_REFUSED)
    throw error
  }
  return payload
}

export const api = {
  get: (path) => call("GET", path),
  post: (path, json) => call("POST", path, { json }),
  put: (path, text) => call("PUT", path, { text }),
  del: (path) => call("DELETE", path)
}

/**
 * Follows `/events` until `stop()`: each event goes to `onEvent({ id, type, data })`; `onStatus(true|false)` says
 * whether the stream is connected. Reconnects with a growing pause, resuming after the last event seen.
 */
export function followEvents(onEvent, onStatus) {
  const controller = new AbortController()
  let lastId
  let pause = 1000
  const run = async () => {
    while (!controller.signal.aborted) {
      try {
        const headers = { authorization: `Bearer ${session.key() ?? ""}` }
        if (lastId !== undefined) headers["last-event-id"] = String(lastId)
        const response = await fetch(`${BASE}/events`, { headers, signal: controller.signal })
        if (response.status === 401) return session.signOut(KEY_REFUSED)
        if (!response.ok || response.body === null) throw new Error(`HTTP ${response.status}`)
        onStatus(true)
        pause = 1000
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        let buffer = ""
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          buffer += value
          let end
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            const event = parseBlock(block)
            if (event !== undefined) {
              lastId = event.id
              onEvent(event)
            }
          }
        }
      } catch (error) {
        if (controller.signal.aborted) return
      }
      onStatus(false)
      await new Promise((resolve) => setTimeout(resolve, pause))
      pause = Math.min(pause * 2, 15000)
    }
  }
  run()
  return { stop: () => controller.abort() }
}

function parseBlock(block) {
  let id
  let type
  let data = ""
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue
    const colon = line.indexOf(":")
    const field = line.slice(0, colon)
    const value = line.slice(colon + 1).replace(/^ /, "")
    if (field === "id") id = Number(value)
    else if (field === "event") type = value
    else if (field === "data") data += value
  }
  if (type === undefined) return undefined
  try {
    return { id, type, data: JSON.parse(data) }
  } catch {
    return undefined
  }
}
