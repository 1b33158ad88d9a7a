/**
 * The web server's application: the admin API (contract, handlers, bearer check) behind the edge (rate limit, CORS,
 * security headers, body bound, error shape), and the web UI's files. Served on whatever `HttpServer` it is given
 * (layers/WebServer.ts gives it Node's, on `[web].bind`).
 */
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Web } from "../schema/GlobalConfig.js"
import { AdminApi, API_PREFIX } from "./api.js"
import { makeEdge } from "./edge.js"
import { makeEventHub } from "./events.js"
import { authorizationLayer, makeHandlers } from "./handlers.js"
import { makeRateLimiter } from "./rateLimit.js"
import { loadUi } from "./ui.js"
import { makeViews } from "./views.js"

export interface WebAppOptions {
  readonly web: typeof Web.Type
  /** `enable_webui`, which follows `enable_api` when not written. */
  readonly uiEnabled: boolean
}

export const makeWebApp = (options: WebAppOptions) =>
  Effect.gen(function* () {
    const { web } = options
    const views = yield* makeViews
    const hub = yield* makeEventHub(views)
    const ui = options.uiEnabled ? yield* loadUi() : undefined
    const api = HttpLayerRouter.addHttpApi(AdminApi).pipe(
      Layer.provide(makeHandlers(views, hub)),
      Layer.provide(authorizationLayer(web.api_key))
    )
    const router = yield* HttpLayerRouter.toHttpEffect(api)
    const app = makeEdge({ limiter: makeRateLimiter(web.rate_limit.requests_per_minute), corsOrigins: web.cors_origins, ui })(router)
    yield* HttpServer.serveEffect()(app)
    const address = (yield* HttpServer.HttpServer).address
    const where = address._tag === "TcpAddress" ? `http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}` : address.path
    yield* Effect.logInfo(
      `web admin: listening on ${where} (API at ${API_PREFIX}${options.uiEnabled ? ", web UI at /" : "; web UI off"})`
    )
  })
