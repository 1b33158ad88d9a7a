/**
 * Provider `controller`: a server managed by a Crafty Controller (API v2).
 *
 * - state: `GET {api_url}/api/v2/servers/{server_id}/stats` -> `data.running` (boolean); `data.crashed` true
 *   means crashed and `data.waiting_start` true means starting, when the server is not running
 * - start / stop: `POST {api_url}/api/v2/servers/{server_id}/action/start_server` / `stop_server`
 * - header: `Authorization: Bearer <api_key>`
 */
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { Observation, Provider, ProviderInput } from "./Provider.js"
import { apiBase, makeRemote, type RemoteApi, type RemoteConfig, withKey } from "./remote.js"

const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { exact: true })

/**
 * What Portal reads of an answer to `/stats`; the other statistics are ignored. `status`, when present, must be
 * "ok"; `crashed` and `waiting_start`, when present, must be booleans (a wrong type is a bad answer, not "false").
 */
export const ControllerStats = Schema.Struct({
  status: optional(Schema.Literal("ok")),
  data: Schema.Struct({
    running: Schema.Boolean.annotations({ title: "true or false" }),
    crashed: optional(Schema.Boolean.annotations({ title: "true or false" })),
    waiting_start: optional(Schema.Boolean.annotations({ title: "true or false" }))
  }).annotations({ title: "an object with running" })
}).annotations({ title: "an object with data" })

const observeController = (answer: typeof ControllerStats.Type): Observation => {
  const data = answer.data
  if (data.running) return { _tag: "Running", detail: "the controller reports the server running" }
  if (data.crashed === true) return { _tag: "Crashed", detail: "the controller reports the server crashed", polled: true }
  if (data.waiting_start === true) return { _tag: "Starting", detail: "the controller reports the server waiting to start" }
  return { _tag: "Stopped", requested: false, detail: "the controller reports the server stopped" }
}

export const controllerApi = (config: RemoteConfig): RemoteApi<typeof ControllerStats.Type, typeof ControllerStats.Encoded> => {
  const base = `${apiBase(config)}/api/v2/servers/${encodeURIComponent(config.server_id)}`
  const action = (name: "start_server" | "stop_server") => HttpClientRequest.post(`${base}/action/${name}`).pipe(withKey(config))
  return {
    name: "controller",
    keyHint: " (an API token of a user allowed to control this server)",
    start: action("start_server"),
    stop: action("stop_server"),
    state: HttpClientRequest.get(`${base}/stats`).pipe(withKey(config)),
    stateAnswer: ControllerStats,
    observe: observeController
  }
}

export const makeController = (
  input: ProviderInput,
  config: RemoteConfig
): Effect.Effect<Provider, never, Scope.Scope | HttpClient.HttpClient> => makeRemote(input, config, controllerApi(config))
