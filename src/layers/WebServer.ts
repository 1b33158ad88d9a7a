/**
 * The web admin server on `[web].bind`: Node's HTTP server running the application of src/http/server.ts. Loaded by
 * layers/Web.ts only when `[web]` is configured, so nothing of the HTTP server is loaded otherwise.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Layer from "effect/Layer"
import { createServer } from "node:http"
import { webUiEnabled } from "../schema/decode.js"
import type { GlobalConfig } from "../schema/GlobalConfig.js"
import { makeWebApp } from "../http/server.js"
import { ConfigEditor } from "../services/ConfigEditor.js"

export const makeWebServerLayer = (global: GlobalConfig & { readonly web: NonNullable<GlobalConfig["web"]> }) =>
  Layer.scopedDiscard(makeWebApp({ web: global.web, uiEnabled: webUiEnabled(global) })).pipe(
    Layer.provide(NodeHttpServer.layer(() => createServer(), { host: global.web.bind.host, port: global.web.bind.port })),
    Layer.provide(ConfigEditor.Default)
  )
