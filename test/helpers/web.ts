/** Portal with `[web]` in this process, its admin API's address and key, a typed client, and an event-stream reader. */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Effect } from "effect"
import { afterEach } from "vitest"
import { AdminApi } from "../../src/http/api.js"
import { type ConfigDir, makeConfigDir } from "./tempdir.js"
import { type RunningPortal, startPortal } from "./portal.js"
import { waitFor } from "./wait.js"

export const API_KEY = "test-key-0123456789abcdef"

export interface WebPortal {
  readonly dir: ConfigDir
  readonly portal: RunningPortal
  /** `http://127.0.0.1:<port>` */
  readonly base: string
  readonly client: AdminClient
  /** A fetch of an API path with the key (unless `headers` says otherwise). */
  request(path: string, init?: RequestInit): Promise<Response>
}

const makeClient = (base: string, key: string) =>
  HttpApiClient.make(AdminApi, {
    baseUrl: base,
    transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(key))
  }).pipe(Effect.provide(FetchHttpClient.layer))

/** The client the contract gives, sending `key` as the bearer token. */
export type AdminClient = Effect.Effect.Success<ReturnType<typeof makeClient>>

export const typedClient = (base: string, key: string): Promise<AdminClient> => Effect.runPromise(makeClient(base, key))

/** Starts Portal with a `[web]` table (`web` is added to it) and the given server files. */
export const startWebPortal = async (
  options: { readonly proxy?: string; readonly web?: string; readonly servers?: Record<string, string> } = {}
): Promise<WebPortal> => {
  const dir = makeConfigDir(
    `bind = "127.0.0.1:0"\n${options.proxy ?? ""}\n[web]\nbind = "127.0.0.1:0"\napi_key = "${API_KEY}"\n${options.web ?? ""}\n`,
    options.servers ?? {}
  )
  const portal = await startPortal(dir.configFile)
  const line = await portal.waitForLog(/web admin: listening on http:\/\/\S+/)
  const base = /listening on (http:\/\/[^\s]+)/.exec(line)![1]!
  const client = await typedClient(base, API_KEY)
  return {
    dir,
    portal,
    base,
    client,
    request: (path, init = {}) =>
      fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${API_KEY}`, ...(init.headers as Record<string, string> | undefined) } })
  }
}

export interface ServerSentEvent {
  readonly id: number
  readonly event: string
  readonly data: unknown
}

export interface EventReader {
  readonly events: Array<ServerSentEvent>
  /** Comment lines (`: connected`, `: keep-alive`). */
  readonly comments: Array<string>
  next(match: (event: ServerSentEvent) => boolean, what: string, timeoutMs?: number): Promise<ServerSentEvent>
  close(): void
}

const readers: Array<EventReader> = []
afterEach(() => {
  for (const reader of readers.splice(0)) reader.close()
})

/** Reads `GET /api/v1/events` with the key in the Authorization header; resolves once subscribed. */
export const readEvents = async (base: string, key = API_KEY, headers: Record<string, string> = {}): Promise<EventReader> => {
  const abort = new AbortController()
  const response = await fetch(`${base}/api/v1/events`, { headers: { authorization: `Bearer ${key}`, ...headers }, signal: abort.signal })
  if (response.status !== 200 || response.body === null) throw new Error(`events: HTTP ${response.status}`)
  const events: Array<ServerSentEvent> = []
  const comments: Array<string> = []
  let buffer = ""
  const decoder = new TextDecoder()
  void (async () => {
    const reader = response.body!.getReader()
    try {
      for (;;) {
        const { value, done } = await reader.read()
        if (done) return
        buffer += decoder.decode(value, { stream: true })
        let end: number
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const fields = new Map<string, string>()
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) comments.push(line.slice(1).trim())
            else {
              const colon = line.indexOf(":")
              fields.set(line.slice(0, colon), line.slice(colon + 1).trimStart())
            }
          }
          if (fields.has("event")) events.push({ id: Number(fields.get("id")), event: fields.get("event")!, data: JSON.parse(fields.get("data") ?? "null") })
        }
      }
    } catch {
      // aborted
    }
  })()
  const result: EventReader = {
    events,
    comments,
    next: (match, what, timeoutMs = 5000) => waitFor(() => events.find(match), { timeoutMs, what: `event ${what}; got ${events.map((e) => e.event).join(", ")}` }),
    close: () => abort.abort()
  }
  readers.push(result)
  await waitFor(() => comments.includes("connected"), { what: "the event stream to be subscribed" })
  return result
}
