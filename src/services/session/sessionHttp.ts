/**
 * One GET to the session service, on Node's own http/https with a keep-alive agent per scheme (loaded on the first
 * client_only login). Not `fetch`: measured on this machine, a keep-alive GET through `http.get` costs about 40 µs of
 * CPU against about 270 µs through `fetch` (undici), and a client_only login's budget is about 1 ms; undici is also
 * more memory for a data plane to load. The answer is bounded (a profile is a few KiB).
 */
import type * as Http from "node:http"

const MAX_ANSWER_BYTES = 65_536

interface Clients {
  readonly http: typeof import("node:http")
  readonly https: typeof import("node:https")
  readonly agents: { readonly http: Http.Agent; readonly https: Http.Agent }
}

let clients: Promise<Clients> | undefined
const loadClients = (): Promise<Clients> =>
  (clients ??= Promise.all([import("node:http"), import("node:https")]).then(([http, https]) => ({
    http,
    https,
    agents: { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) }
  })))

export interface Answer {
  readonly status: number
  readonly text: string
}

/** GETs `url`; rejects on a network error, an answer over 64 KiB, or when `signal` aborts (its reason as the cause). */
export const getText = async (url: URL, signal: AbortSignal): Promise<Answer> => {
  const { http, https, agents } = await loadClients()
  const secure = url.protocol === "https:"
  return new Promise<Answer>((resolve, reject) => {
    const options = { agent: secure ? agents.https : agents.http, signal, headers: { accept: "application/json" } }
    const request = (secure ? https : http).get(url, options, (response) => {
      const chunks: Array<Buffer> = []
      let size = 0
      response.on("data", (chunk: Buffer) => {
        size += chunk.length
        if (size > MAX_ANSWER_BYTES) request.destroy(new Error(`an answer of more than ${MAX_ANSWER_BYTES} bytes`))
        else chunks.push(chunk)
      })
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }))
      response.on("error", reject)
    })
    request.on("error", reject)
  })
}
