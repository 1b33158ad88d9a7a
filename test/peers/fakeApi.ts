/**
 * The machinery of the fake provider APIs (fakePanel.ts, fakeController.ts): a real node:http server on
 * 127.0.0.1 that records every request and can be told to refuse the key, answer 500, be slow, or go away.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { afterEach } from "vitest"

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly authorization: string | undefined
  readonly accept: string | undefined
  readonly contentType: string | undefined
  readonly body: string
  /** Date.now() when it arrived. */
  readonly at: number
}

/** How the fake answers besides its normal behaviour. */
export type FailureMode =
  | { readonly _tag: "None" }
  | { readonly _tag: "Unauthorized"; readonly status?: 401 | 403 }
  | { readonly _tag: "Error"; readonly status?: number }
  | { readonly _tag: "Slow"; readonly delayMs: number }
  /** HTTP 200 with this text as the body, whatever it is (nonsense, JSON of another shape). */
  | { readonly _tag: "Body"; readonly text: string }

export interface Reply {
  readonly status: number
  readonly body?: unknown
}

export type Handler = (request: RecordedRequest) => Reply

export interface FakeApi {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  readonly port: number
  readonly requests: Array<RecordedRequest>
  failure: FailureMode
  /** Requests that match. */
  count(method: string, pathPart: string): number
  /** Runs `action` after `ms` unless the fake is closed first. */
  after(ms: number, action: () => void): void
  /** Stops listening (the API becomes unreachable) until `up()`. */
  down(): Promise<void>
  up(): Promise<void>
  close(): Promise<void>
}

const running: Array<FakeApi> = []
afterEach(async () => {
  for (const api of running.splice(0)) await api.close()
})

const readBody = (request: IncomingMessage) =>
  new Promise<string>((resolve) => {
    let text = ""
    request.setEncoding("utf8")
    request.on("data", (chunk: string) => (text += chunk))
    request.on("end", () => resolve(text))
    request.on("error", () => resolve(text))
  })

const send = (response: ServerResponse, reply: Reply) => {
  if (reply.body === undefined) {
    response.writeHead(reply.status)
    response.end()
    return
  }
  const text = JSON.stringify(reply.body)
  response.writeHead(reply.status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  response.end(text)
}

export const startFakeApi = async (options: { readonly apiKey: string; readonly handle: Handler }): Promise<FakeApi> => {
  const timers = new Set<NodeJS.Timeout>()
  let server: Server | undefined
  let port = 0
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const next = createServer((request, response) => {
        void readBody(request).then((body) => {
          const recorded: RecordedRequest = {
            method: request.method ?? "",
            path: request.url ?? "",
            authorization: request.headers.authorization,
            accept: request.headers.accept,
            contentType: request.headers["content-type"],
            body,
            at: Date.now()
          }
          api.requests.push(recorded)
          const failure = api.failure
          const answer = () => {
            if (failure._tag === "Unauthorized") return send(response, { status: failure.status ?? 401, body: { errors: [{ code: "AuthenticationException" }] } })
            if (failure._tag === "Error") return send(response, { status: failure.status ?? 500, body: { errors: [{ code: "InternalError" }] } })
            if (failure._tag === "Body") {
              response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(failure.text) })
              return response.end(failure.text)
            }
            if (recorded.authorization !== `Bearer ${options.apiKey}`) return send(response, { status: 401, body: { error: "bad key" } })
            return send(response, options.handle(recorded))
          }
          if (failure._tag === "Slow") {
            const timer = setTimeout(() => {
              timers.delete(timer)
              if (!response.destroyed) answer()
            }, failure.delayMs)
            timers.add(timer)
          } else answer()
        })
      })
      next.keepAliveTimeout = 1000
      next.once("error", reject)
      next.listen(port, "127.0.0.1", () => {
        port = (next.address() as AddressInfo).port
        server = next
        resolve()
      })
    })
  const stop = () =>
    new Promise<void>((resolve) => {
      const current = server
      server = undefined
      if (current === undefined) return resolve()
      current.close(() => resolve())
      current.closeAllConnections()
    })
  await listen()
  const api: FakeApi = {
    url: `http://127.0.0.1:${port}`,
    port,
    requests: [],
    failure: { _tag: "None" },
    count: (method, pathPart) => api.requests.filter((r) => r.method === method && r.path.includes(pathPart)).length,
    after: (ms, action) => {
      const timer = setTimeout(() => {
        timers.delete(timer)
        action()
      }, ms)
      timers.add(timer)
    },
    down: stop,
    up: listen,
    close: async () => {
      for (const timer of timers) clearTimeout(timer)
      timers.clear()
      await stop()
    }
  }
  running.push(api)
  return api
}
