/**
 * One GET to the session service, on Node's own http/https with a keep-alive agent per scheme (loaded on the first
 * client_only login). Not `fetch`: measured on this machine, a keep-alive GET through `http.get` costs about 40 µs of
 * CPU against about 270 µs through `fetch` (undici), and a client_only login's budget is about 1 ms; undici is also
 * more memory for a data plane to load. The answer is bounded (a profile is a few KiB).
 *
 * Callbacks, not a promise with an AbortSignal: the bound is a plain timer held by the request (never only by an
 * object a collection could take), and cancelling destroys the request. A client_only login measured about 380 µs of
 * CPU cheaper this way (1.3 ms to 0.93 ms on a 2.6 GHz Xeon) than through an AbortController per request and Effect's
 * own timeout, which forks fibers to race a sleep.
 */
import type * as Http from "node:http"

const MAX_ANSWER_BYTES = 65_536

interface Clients {
  readonly http: typeof import("node:http")
  readonly https: typeof import("node:https")
  readonly agents: { readonly http: Http.Agent; readonly https: Http.Agent }
}

let clients: Clients | undefined
let loading: Promise<Clients> | undefined
const loadClients = (): Promise<Clients> =>
  (loading ??= Promise.all([import("node:http"), import("node:https")]).then(([http, https]) => {
    clients = { http, https, agents: { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) } }
    return clients
  }))

export interface Answer {
  readonly status: number
  readonly text: string
}

/** How a GET ended: an answer, or why there is none (a network error, an answer over 64 KiB, no answer in time). */
export type Outcome = { readonly _tag: "Answer"; readonly answer: Answer } | { readonly _tag: "Failed"; readonly error: Error }

/**
 * GETs `url` and calls `done` once with the outcome, unless cancelled first. Returns the cancel: it destroys the
 * request and `done` is not called.
 */
export const getText = (url: URL, timeoutMs: number, done: (outcome: Outcome) => void): (() => void) => {
  let request: Http.ClientRequest | undefined
  let finished = false
  /** Ends the GET once: false when it had already ended. */
  const end = (): boolean => {
    if (finished) return false
    finished = true
    clearTimeout(timer)
    return true
  }
  const finish = (outcome: Outcome): void => {
    if (!end()) return
    if (outcome._tag === "Failed") request?.destroy()
    done(outcome)
  }
  const timer = setTimeout(() => finish({ _tag: "Failed", error: new Error("no answer in time") }), timeoutMs)
  const send = ({ http, https, agents }: Clients): void => {
    if (finished) return
    const secure = url.protocol === "https:"
    const options = { agent: secure ? agents.https : agents.http, headers: { accept: "application/json" } }
    request = (secure ? https : http).get(url, options, (response) => {
      const chunks: Array<Buffer> = []
      let size = 0
      response.on("data", (chunk: Buffer) => {
        size += chunk.length
        if (size > MAX_ANSWER_BYTES) finish({ _tag: "Failed", error: new Error(`an answer of more than ${MAX_ANSWER_BYTES} bytes`) })
        else chunks.push(chunk)
      })
      response.on("end", () => finish({ _tag: "Answer", answer: { status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") } }))
      response.on("error", (error) => finish({ _tag: "Failed", error }))
    })
    request.on("error", (error) => finish({ _tag: "Failed", error }))
  }
  if (clients !== undefined) send(clients)
  else loadClients().then(send, (error: unknown) => finish({ _tag: "Failed", error: error instanceof Error ? error : new Error(String(error)) }))
  return () => {
    if (end()) request?.destroy()
  }
}
