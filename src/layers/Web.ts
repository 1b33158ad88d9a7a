/**
 * The web plugin: with `[web]` (and `enable_api`) the admin API and web UI are served; without it no HTTP server
 * runs and none of its code is loaded (the server's modules are imported only here, on demand).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ConfigStore } from "../services/ConfigStore.js"

export const WebLayer = Layer.unwrapEffect(
  Effect.gen(function* () {
    // `[web]` is bound at startup (a reload that changes it is reported as needing a restart).
    const global = (yield* (yield* ConfigStore).get).global
    const web = global.web
    if (web === undefined) return Layer.empty
    if (!web.enable_api) {
      yield* Effect.logInfo("[web]: enable_api = false; no admin API or web UI is served")
      return Layer.empty
    }
    const { makeWebServerLayer } = yield* Effect.promise(() => import("./WebServer.js"))
    return makeWebServerLayer({ ...global, web })
  })
)
