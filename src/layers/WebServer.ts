/**
 * The web admin server on `[web].bind`: Node's HTTP server running the application of src/http/server.ts. Loaded by
 * layers/Web.ts only when `[web]` is configured, so nothing of the HTTP server is loaded otherwise.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Layer from "effect/Layer"
import { createServer } from "node:http"
import { webUiEnabled } from "../schema/decode.js"
import type { GlobalConfig } from "../schema/GlobalConfig.js"
import { formatHostPort } from "../schema/HostPort.js"
import { makeWebApp } from "../http/server.js"
import { ConfigEditor } from "../services/ConfigEditor.js"
import { ListenError } from "../services/listener/listen.js"

/** Why the server could not listen, in the words the game bind uses (the platform's error has no message of its own). */
const listenReason = (error: { readonly cause?: unknown }): string => {
  const cause = error.cause as NodeJS.ErrnoException | undefined
  if (cause?.code === "EADDRINUSE") return "the address is already in use"
  if (cause instanceof Error && cause.message.length > 0) return cause.message
  return String(cause ?? "unknown error")
}

export const makeWebServerLayer = (global: GlobalConfig & { readonly web: NonNullable<GlobalConfig["web"]> }) =>
  Layer.scopedDiscard(makeWebApp({ web: global.web, uiEnabled: webUiEnabled(global) })).pipe(
    Layer.provide(
      NodeHttpServer.layer(() => createServer(), { host: global.web.bind.host, port: global.web.bind.port }).pipe(
        Layer.catchAll((error) => Layer.fail(new ListenError({ address: `${formatHostPort(global.web.bind)} (web)`, reason: listenReason(error) })))
      )
    ),
    Layer.provide(ConfigEditor.Default)
  )
