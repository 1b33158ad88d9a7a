/**
 * A client of the Docker Engine API (also served by Podman's Docker-compatible socket), with what discovery needs:
 * `GET /version` (the API version is negotiated from it), the list of running labelled containers, one container's
 * inspection and the `/events` stream. Node's `http` module speaks it over a unix socket (`socketPath`) or TCP: the
 * platform's HttpClient has no unix sockets, and a long-lived chunked stream is a few lines of `http` anyway. Every
 * answer is decoded with Schema (only the fields Portal reads; the rest is ignored); every failure is an
 * `EngineError` naming the reason.
 */
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as http from "node:http"
import type { ContainerEndpoint } from "../../schema/ContainerEndpoint.js"
import { formatHostPort } from "../../schema/HostPort.js"
import { describeParseError, oneLine } from "../parseIssue.js"

/** The runtime gave no answer, an HTTP error, or an answer Portal cannot read; `reason` says which and why. */
export class EngineError extends Data.TaggedError("EngineError")<{ readonly reason: string }> {}

/** How long one request may take (the event stream excepted, once it has answered). */
export const REQUEST_TIMEOUT = Duration.seconds(10)
/** The largest answer read (a list of containers); the event stream is read line by line. */
const MAX_ANSWER_BYTES = 32 * 1024 * 1024
const MAX_EVENT_LINE = 1024 * 1024

/** API versions Portal speaks: every field it reads is present from 1.24 on and unchanged since. */
const API_MIN = "1.24"
const API_MAX = "1.47"

const versionParts = (version: string): [number, number] => {
  const [major, minor] = version.split(".").map(Number)
  return [Number.isFinite(major) ? major! : 0, Number.isFinite(minor) ? minor! : 0]
}
const compareApiVersions = (a: string, b: string): number => {
  const [am, an] = versionParts(a)
  const [bm, bn] = versionParts(b)
  return am !== bm ? am - bm : an - bn
}

/**
 * The version requests use: the runtime's own, capped at the newest Portal knows, and never below the oldest the
 * runtime accepts (a runtime newer than Portal still answers these fields the same way).
 */
export const negotiateApiVersion = (answer: VersionAnswer): Either.Either<string, string> => {
  if (compareApiVersions(answer.ApiVersion, API_MIN) < 0) {
    return Either.left(`the runtime speaks API ${answer.ApiVersion}; Portal needs ${API_MIN} or newer`)
  }
  let version = compareApiVersions(answer.ApiVersion, API_MAX) > 0 ? API_MAX : answer.ApiVersion
  if (answer.MinAPIVersion !== undefined && compareApiVersions(answer.MinAPIVersion, version) > 0) version = answer.MinAPIVersion
  return Either.right(version)
}

const optional = <A, I>(schema: Schema.Schema<A, I>) => Schema.optional(Schema.NullOr(schema))
const Labels = Schema.Record({ key: Schema.String, value: Schema.String })
const Network = Schema.Struct({ IPAddress: optional(Schema.String), GlobalIPv6Address: optional(Schema.String) })
const Networks = Schema.Record({ key: Schema.String, value: Network })
const HostConfig = Schema.Struct({ NetworkMode: optional(Schema.String) })

export const VersionAnswer = Schema.Struct({
  ApiVersion: Schema.String,
  MinAPIVersion: Schema.optional(Schema.String),
  Version: Schema.optional(Schema.String),
  Platform: optional(Schema.Struct({ Name: optional(Schema.String) }))
})
export type VersionAnswer = typeof VersionAnswer.Type

/** An entry of `GET /containers/json`. */
export const ContainerSummary = Schema.Struct({
  Id: Schema.String,
  Names: optional(Schema.Array(Schema.String)),
  Labels: optional(Labels),
  State: optional(Schema.String),
  Created: optional(Schema.Number),
  HostConfig: optional(HostConfig),
  NetworkSettings: optional(Schema.Struct({ Networks: optional(Networks) })),
  Ports: optional(
    Schema.Array(Schema.Struct({ IP: optional(Schema.String), PrivatePort: Schema.Number, PublicPort: optional(Schema.Number), Type: Schema.String }))
  )
})
export type ContainerSummary = typeof ContainerSummary.Type

/** `GET /containers/{id}/json`. */
export const ContainerInspect = Schema.Struct({
  Id: Schema.String,
  Name: Schema.String,
  Created: optional(Schema.String),
  Config: optional(Schema.Struct({ Labels: optional(Labels) })),
  State: Schema.Struct({ Running: Schema.Boolean, Paused: optional(Schema.Boolean) }),
  HostConfig: optional(HostConfig),
  NetworkSettings: optional(
    Schema.Struct({
      Networks: optional(Networks),
      Ports: optional(
        Schema.Record({
          key: Schema.String,
          value: Schema.NullOr(Schema.Array(Schema.Struct({ HostIp: optional(Schema.String), HostPort: Schema.String })))
        })
      )
    })
  )
})
export type ContainerInspect = typeof ContainerInspect.Type

/** One line of `/events` (API 1.24 and later name the fields this way). */
export const EngineEvent = Schema.Struct({
  Type: Schema.String,
  Action: Schema.String,
  Actor: Schema.Struct({ ID: Schema.String, Attributes: optional(Labels) })
})
export type EngineEvent = typeof EngineEvent.Type

/** What the events stream gives: an event, or the end of the stream (the runtime went away). */
export type EventItem = { readonly _tag: "Event"; readonly event: EngineEvent } | { readonly _tag: "Ended"; readonly reason: string }

export interface EventStream {
  /** The next event; fails when the stream has ended. */
  readonly take: Effect.Effect<EngineEvent, EngineError>
}

/** The endpoint as messages name it. */
export const describeEndpoint = (endpoint: ContainerEndpoint): string =>
  endpoint._tag === "Unix" ? `unix://${endpoint.path}` : `tcp://${formatHostPort(endpoint)}`

/** Why a connection failed, in words an administrator can act on. */
const describeSocketError = (endpoint: ContainerEndpoint, error: NodeJS.ErrnoException): string => {
  switch (error.code) {
    case "ENOENT":
      return endpoint._tag === "Unix" ? `no socket at ${endpoint.path}` : error.message
    case "EACCES":
      return endpoint._tag === "Unix"
        ? `permission denied on ${endpoint.path} (Portal's user needs access to the socket, e.g. the docker group)`
        : error.message
    case "ECONNREFUSED":
      return "connection refused"
    case "ECONNRESET":
      return "connection reset"
    default:
      return error.code ?? error.message
  }
}

const parseJson = Schema.decodeEither(Schema.parseJson())

const decodeAnswer = <A, I>(schema: Schema.Schema<A, I>, what: string, text: string): Either.Either<A, EngineError> =>
  Either.match(parseJson(text), {
    onLeft: () => Either.left(new EngineError({ reason: `the answer to ${what} is not JSON: ${oneLine(text)}` })),
    onRight: (json) =>
      Either.mapLeft(
        Schema.decodeUnknownEither(schema)(json),
        (error) => new EngineError({ reason: `unexpected answer to ${what}: ${describeParseError(error)}` })
      )
  })

/** The Engine API's error body is `{"message": "..."}`. */
const ErrorBody = Schema.Struct({ message: Schema.String })
const refused = (what: string, status: number, body: string) =>
  new EngineError({ reason: `HTTP ${status} to ${what}${Either.match(decodeAnswer(ErrorBody, what, body), {
      onLeft: () => (body.trim().length > 0 ? `: ${oneLine(body.trim())}` : ""),
      onRight: (error) => `: ${oneLine(error.message)}`
    })}`
  })

export interface EngineClient {
  readonly endpoint: ContainerEndpoint
  /** `GET /version`, unversioned: what the runtime is, and which API version to speak. */
  readonly version: Effect.Effect<{ readonly answer: VersionAnswer; readonly apiVersion: string }, EngineError>
  /** Running containers with `portal.enable=true`. */
  readonly list: (apiVersion: string) => Effect.Effect<ReadonlyArray<ContainerSummary>, EngineError>
  /** One container, or none when it no longer exists. */
  readonly inspect: (apiVersion: string, id: string) => Effect.Effect<Option.Option<ContainerInspect>, EngineError>
  /** Opens the container event stream; it is closed with the scope. */
  readonly events: (apiVersion: string) => Effect.Effect<EventStream, EngineError, Scope.Scope>
}

const filters = (value: Record<string, ReadonlyArray<string>>) => encodeURIComponent(JSON.stringify(value))
const LIST_FILTERS = { label: ["portal.enable=true"], status: ["running"] }
const EVENT_ACTIONS = ["start", "stop", "die", "destroy", "pause", "unpause", "rename", "update"] as const
const EVENT_FILTERS = { type: ["container"], event: [...EVENT_ACTIONS] }

export const makeEngineClient = (endpoint: ContainerEndpoint): EngineClient => {
  const target: http.RequestOptions =
    endpoint._tag === "Unix"
      ? { socketPath: endpoint.path, headers: { host: "localhost", accept: "application/json" } }
      : { host: endpoint.host, port: endpoint.port, headers: { accept: "application/json" } }
  const where = describeEndpoint(endpoint)
  const unreachable = (error: NodeJS.ErrnoException) =>
    new EngineError({ reason: `cannot reach ${where} (${describeSocketError(endpoint, error)})` })

  /** One GET, its status and whole body; interruption (a timeout) destroys the request. */
  const get = (path: string, what: string): Effect.Effect<{ readonly status: number; readonly body: string }, EngineError> =>
    Effect.async<{ readonly status: number; readonly body: string }, EngineError>((resumeFiber) => {
      // Node may report one failure several ways (an error, then a close): the first word is the answer.
      let settled = false
      const resume = (effect: Effect.Effect<{ readonly status: number; readonly body: string }, EngineError>) => {
        if (settled) return
        settled = true
        resumeFiber(effect)
      }
      const request = http.request({ ...target, path, method: "GET", agent: false }, (response) => {
        const chunks: Array<Buffer> = []
        let size = 0
        response.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size > MAX_ANSWER_BYTES) {
            resume(Effect.fail(new EngineError({ reason: `the answer to ${what} is larger than ${MAX_ANSWER_BYTES} bytes` })))
            request.destroy()
            return
          }
          chunks.push(chunk)
        })
        response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") })))
        response.on("error", (error) => resume(Effect.fail(unreachable(error))))
        response.on("close", () =>
          resume(Effect.fail(new EngineError({ reason: `${where} closed the connection before answering ${what}` })))
        )
      })
      request.on("error", (error) => resume(Effect.fail(unreachable(error))))
      request.end()
      return Effect.sync(() => request.destroy())
    }).pipe(
      Effect.timeoutFail({
        duration: REQUEST_TIMEOUT,
        onTimeout: () => new EngineError({ reason: `${where} did not answer ${what} within ${Duration.format(REQUEST_TIMEOUT)}` })
      })
    )

  const getJson = <A, I>(schema: Schema.Schema<A, I>, path: string, what: string) =>
    Effect.flatMap(get(path, what), ({ status, body }) =>
      status >= 200 && status < 300 ? decodeAnswer(schema, what, body) : Effect.fail(refused(what, status, body))
    )

  const version = Effect.flatMap(getJson(VersionAnswer, "/version", "GET /version"), (answer) =>
    Either.match(negotiateApiVersion(answer), {
      onLeft: (reason) => Effect.fail(new EngineError({ reason })),
      onRight: (apiVersion) => Effect.succeed({ answer, apiVersion })
    })
  )

  const list = (apiVersion: string) =>
    getJson(Schema.Array(ContainerSummary), `/v${apiVersion}/containers/json?filters=${filters(LIST_FILTERS)}`, "GET /containers/json")

  const inspect = (apiVersion: string, id: string) => {
    const what = `GET /containers/${id.slice(0, 12)}/json`
    return Effect.flatMap(get(`/v${apiVersion}/containers/${encodeURIComponent(id)}/json`, what), ({ status, body }) =>
      status === 404
        ? Effect.succeedNone
        : status >= 200 && status < 300
          ? Effect.map(decodeAnswer(ContainerInspect, what, body), Option.some)
          : Effect.fail(refused(what, status, body))
    )
  }

  const events = (apiVersion: string): Effect.Effect<EventStream, EngineError, Scope.Scope> =>
    Effect.gen(function* () {
      const queue = yield* Effect.acquireRelease(Queue.unbounded<EventItem>(), Queue.shutdown)
      const opened = yield* Deferred.make<void, EngineError>()
      const what = "GET /events"
      // Started synchronously and released with the scope; waiting for the answer below stays interruptible.
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          const end = (reason: string) => Queue.unsafeOffer(queue, { _tag: "Ended", reason })
          const request = http.request(
            { ...target, path: `/v${apiVersion}/events?filters=${filters(EVENT_FILTERS)}`, method: "GET", agent: false },
            (response) => {
              const status = response.statusCode ?? 0
              if (status < 200 || status >= 300) {
                let body = ""
                response.setEncoding("utf8")
                response.on("data", (chunk: string) => (body = (body + chunk).slice(0, 4096)))
                response.on("end", () => Deferred.unsafeDone(opened, Exit.fail(refused(what, status, body))))
                return
              }
              Deferred.unsafeDone(opened, Exit.void)
              let pending = ""
              response.setEncoding("utf8")
              response.on("data", (chunk: string) => {
                pending += chunk
                let newline = pending.indexOf("\n")
                while (newline >= 0) {
                  const line = pending.slice(0, newline).trim()
                  pending = pending.slice(newline + 1)
                  if (line.length > 0) {
                    Either.match(decodeAnswer(EngineEvent, "an event", line), {
                      // A line Portal cannot read (another kind of event, a newer shape) is not a reason to reconnect.
                      onLeft: () => undefined,
                      onRight: (event) => Queue.unsafeOffer(queue, { _tag: "Event", event })
                    })
                  }
                  newline = pending.indexOf("\n")
                }
                if (pending.length > MAX_EVENT_LINE) {
                  end(`an event line from ${where} is longer than ${MAX_EVENT_LINE} bytes`)
                  request.destroy()
                }
              })
              response.on("error", (error) => end(`lost ${where} (${describeSocketError(endpoint, error)})`))
              response.on("close", () => end(`${where} closed the event stream`))
            }
          )
          // A stream over TCP can sit idle for hours: keepalive notices a peer that vanished without closing it.
          if (endpoint._tag === "Tcp") request.on("socket", (socket) => socket.setKeepAlive(true, 30_000))
          // Before an answer this fails the opening; after, the opening is done and the stream ends instead.
          request.on("error", (error) => {
            Deferred.unsafeDone(opened, Exit.fail(unreachable(error)))
            end(`cannot reach ${where} (${describeSocketError(endpoint, error)})`)
          })
          request.end()
          return request
        }),
        (request) => Effect.sync(() => request.destroy())
      )
      yield* Deferred.await(opened).pipe(
        Effect.timeoutFail({
          duration: REQUEST_TIMEOUT,
          onTimeout: () => new EngineError({ reason: `${where} did not answer ${what} within ${Duration.format(REQUEST_TIMEOUT)}` })
        })
      )
      const take = Effect.flatMap(Queue.take(queue), (item) =>
        item._tag === "Event" ? Effect.succeed(item.event) : Effect.fail(new EngineError({ reason: item.reason }))
      )
      return { take }
    })

  return { endpoint, version, list, inspect, events }
}
