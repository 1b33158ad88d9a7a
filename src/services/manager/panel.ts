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
import type * as Scope from "effect/Scope"
import type { Observation, Provider, ProviderInput } from "./Provider.js"
import { apiBase, makeRemote, type RemoteApi, type RemoteConfig, withKey } from "./remote.js"

export const panelApi = (config: RemoteConfig): RemoteApi => {
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
    parseState: (body): Observation | string => {
      const attributes = (body as { attributes?: { current_state?: unknown } } | null)?.attributes
      const current = attributes?.current_state
      const detail = `the panel reports "${String(current)}"`
      switch (current) {
        case "running":
          return { _tag: "Running", detail }
        case "starting":
          return { _tag: "Starting", detail }
        case "stopping":
          return { _tag: "Stopping", detail }
        case "offline":
          return { _tag: "Stopped", requested: false, detail }
        default:
          return `attributes.current_state is ${JSON.stringify(current) ?? "missing"}, expected running, starting, stopping or offline`
      }
    }
  }
}

export const makePanel = (
  input: ProviderInput,
  config: RemoteConfig
): Effect.Effect<Provider, never, Scope.Scope | HttpClient.HttpClient> => makeRemote(input, config, panelApi(config))
