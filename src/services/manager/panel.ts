/**
 * Provider `panel`: a server on a hosting panel with a Pterodactyl-compatible client API.
 *
 * - state: `GET {api_url}/api/client/servers/{server_id}/resources` -> `attributes.current_state`
 *   (`running`, `starting`, `stopping`, `offline`)
 * - start / stop: `POST {api_url}/api/client/servers/{server_id}/power` with `{"signal":"start"}` / `{"signal":"stop"}`
 * - headers: `Authorization: Bearer <api_key>`, `Accept: application/json`, `Content-Type: application/json`
 */
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { Observation, Provider, ProviderInput } from "./Provider.js"
import { apiBase, makeRemote, type RemoteApi, type RemoteConfig, withKey } from "./remote.js"

/** What Portal reads of an answer to `/resources`; the rest (resources, is_suspended, ...) is ignored. */
export const PanelResources = Schema.Struct({
  attributes: Schema.Struct({
    current_state: Schema.Literal("running", "starting", "stopping", "offline").annotations({
      // One message for the whole union (else the first literal alone is named).
      message: (issue) => ({ message: `Expected running, starting, stopping or offline, actual ${JSON.stringify(issue.actual)}`, override: true })
    })
  }).annotations({ title: "an object with current_state" })
}).annotations({ title: "an object with attributes" })

const observePanel = (answer: typeof PanelResources.Type): Observation => {
  const current = answer.attributes.current_state
  const detail = `the panel reports "${current}"`
  switch (current) {
    case "running":
      return { _tag: "Running", detail }
    case "starting":
      return { _tag: "Starting", detail }
    case "stopping":
      return { _tag: "Stopping", detail }
    case "offline":
      return { _tag: "Stopped", requested: false, detail }
  }
}

export const panelApi = (config: RemoteConfig): RemoteApi<typeof PanelResources.Type, typeof PanelResources.Encoded> => {
  const base = `${apiBase(config)}/api/client/servers/${encodeURIComponent(config.server_id)}`
  const headers = (request: HttpClientRequest.HttpClientRequest) =>
    request.pipe(withKey(config), HttpClientRequest.setHeader("Content-Type", "application/json"))
  const power = (signal: "start" | "stop") =>
    HttpClientRequest.post(`${base}/power`).pipe(headers, HttpClientRequest.bodyUnsafeJson({ signal }))
  return {
    name: "panel",
    keyHint: " (a client API key of a user allowed to control this server)",
    start: power("start"),
    stop: power("stop"),
    state: HttpClientRequest.get(`${base}/resources`).pipe(headers),
    stateAnswer: PanelResources,
    observe: observePanel
  }
}

export const makePanel = (
  input: ProviderInput,
  config: RemoteConfig
): Effect.Effect<Provider, never, Scope.Scope | HttpClient.HttpClient> => makeRemote(input, config, panelApi(config))
