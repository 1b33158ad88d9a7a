/**
 * The admin API's handlers: each route of the contract (api.ts) carried out through the services' Effect surfaces.
 * Failures are the contract's error classes; a failure of Portal's own (a file that cannot be written) is logged and
 * answered 500.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { createHash, timingSafeEqual } from "node:crypto"
import { DurationString } from "../schema/Duration.js"
import type { ConfigProblem } from "../schema/problems.js"
import { BanStore } from "../services/BanStore.js"
import { normaliseTarget } from "../services/bans/target.js"
import { ConfigEditor } from "../services/ConfigEditor.js"
import { Lifecycle } from "../services/Lifecycle.js"
import { PlayerRegistry } from "../services/PlayerRegistry.js"
import { ServerManager } from "../services/ServerManager.js"
import { Telemetry } from "../services/Telemetry.js"
import { AdminApi, Authorization } from "./api.js"
import type { EventHub } from "./events.js"
import { isBodyTooLarge } from "./limits.js"
import {
  BadRequest,
  badRequest,
  Conflict,
  errorBody,
  InternalError,
  NotFound,
  notFound,
  PayloadTooLarge,
  ServiceUnavailable,
  Unauthorized,
  UnsupportedMediaType
} from "./schemas.js"
import { banView, matchesPlayer, playerView, type Views } from "./views.js"
import { banDurationProblem } from "../services/bans/banDuration.js"

/** Who the audit log names for changes made through the API. */
export const API_SOURCE = "api"
const DEFAULT_KICK_REASON = "Kicked by an operator"

/** Compares a presented key with the configured one in constant time (digests first, so lengths do not show). */
export const keysMatch = (presented: string, expected: string): boolean =>
  timingSafeEqual(createHash("sha256").update(presented).digest(), createHash("sha256").update(expected).digest())

const unauthorized = new Unauthorized({ error: errorBody("unauthorized", "a valid key is required: Authorization: Bearer <api_key>") })

/** The bearer check; with no key configured (which the configuration rules prevent) nothing is let in. */
export const authorizationLayer = (apiKey: string | undefined) =>
  Layer.succeed(
    Authorization,
    Authorization.of({
      bearer: (token) =>
        apiKey !== undefined && keysMatch(Redacted.value(token), apiKey) ? Effect.void : Effect.fail(unauthorized)
    })
  )

const internal = (what: string) => (error: { readonly reason: string }) =>
  Effect.zipRight(
    Effect.logError(`admin API: ${what}: ${error.reason}`),
    Effect.fail(new InternalError({ error: errorBody("internal", `${what}: ${error.reason}`) }))
  )

const invalidConfig = (problems: ReadonlyArray<ConfigProblem>) =>
  badRequest("invalid_config", `the configuration has ${problems.length} problem(s); nothing was written`, { problems })

const TOML_TYPES = new Set(["application/toml", "text/plain", "application/x-toml", "text/x-toml"])

/** TOML files are UTF-8: a body that is not is refused rather than written with its bytes replaced. */
const utf8 = new TextDecoder("utf-8", { fatal: true })

/**
 * The body of a request that carries a TOML file: `application/toml`, `text/plain` (or the `x-toml` types, or no
 * type at all), in UTF-8.
 */
const readToml = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const [mediaType = "", ...parameters] = (request.headers["content-type"] ?? "").split(";")
    const type = mediaType.trim().toLowerCase()
    if (type !== "" && !TOML_TYPES.has(type)) {
      return yield* Effect.fail(
        new UnsupportedMediaType({ error: errorBody("unsupported_media_type", `send the file as application/toml or text/plain, not ${type}`) })
      )
    }
    const charset = parameters.map((parameter) => /^\s*charset\s*=\s*"?([^";\s]+)"?\s*$/i.exec(parameter)?.[1]?.toLowerCase()).find((value) => value !== undefined)
    if (charset !== undefined && charset !== "utf-8" && charset !== "utf8") {
      return yield* Effect.fail(
        new UnsupportedMediaType({ error: errorBody("unsupported_media_type", `a TOML file is UTF-8; send it as charset=utf-8, not ${charset}`) })
      )
    }
    const bytes = yield* request.arrayBuffer.pipe(
      Effect.mapError((error) =>
        isBodyTooLarge(error)
          ? new PayloadTooLarge({ error: errorBody("payload_too_large", "the request body is too large") })
          : new BadRequest({ error: errorBody("bad_request", `cannot read the request body: ${error.message}`) })
      )
    )
    return yield* Effect.try({
      try: () => utf8.decode(bytes),
      catch: () => new BadRequest({ error: errorBody("bad_request", "the body is not UTF-8 text: a TOML file is UTF-8") })
    })
  })

const decodeDuration = Schema.decodeUnknownEither(DurationString)

export const makeHandlers = (views: Views, hub: EventHub) => {
  const openapi = OpenApi.fromApi(AdminApi)

  const Health = HttpApiBuilder.group(AdminApi, "health", (handlers) =>
    Effect.gen(function* () {
      const lifecycle = yield* Lifecycle
      return handlers.handle("health", () =>
        Effect.flatMap(lifecycle.shuttingDown, (stopping) =>
          stopping
            ? Effect.fail(new ServiceUnavailable({ error: errorBody("shutting_down", "Portal is shutting down") }))
            : Effect.succeed({ status: "ok" as const })
        )
      )
    })
  )

  const metricsOff = new NotFound({
    error: errorBody("not_found", "metrics are served when [telemetry] is enabled with [telemetry.metrics] enabled")
  })

  const Proxy = HttpApiBuilder.group(AdminApi, "proxy", (handlers) =>
    Effect.map(Telemetry, (telemetry) =>
      handlers
        .handle("info", () => views.proxyInfo)
        .handle("stats", () => views.statsView)
        .handle("metrics", () => telemetry.prometheus ?? Effect.fail(metricsOff))
        .handle("openapi", () => Effect.succeed(HttpServerResponse.unsafeJson(openapi)))
        .handleRaw("events", ({ request }) =>
          Effect.sync(() => {
            const last = Number(request.headers["last-event-id"])
            const body = hub.stream(Number.isInteger(last) && last >= 0 ? last : undefined).pipe(Stream.encodeText)
            return HttpServerResponse.stream(body, {
              contentType: "text/event-stream",
              // `connection: close`: once a stream ends (Portal stopping) its connection goes too, instead of idling
              // in keep-alive while the HTTP server waits for it to close.
              headers: { "cache-control": "no-store", "x-accel-buffering": "no", connection: "close" }
            })
          })
        )
    )
  )

  const Players = HttpApiBuilder.group(AdminApi, "players", (handlers) =>
    Effect.gen(function* () {
      const registry = yield* PlayerRegistry
      const matching = (player: string) =>
        Effect.flatMap(registry.list, (sessions) => {
          const found = sessions.filter((session) => matchesPlayer(session, player))
          return found.length > 0 ? Effect.succeed(found) : Effect.fail(notFound("player", player))
        })
      return handlers
        .handle("list", ({ urlParams }) =>
          Effect.map(registry.list, (sessions) => {
            const q = urlParams.q?.trim().toLowerCase()
            return sessions
              .filter((session) => urlParams.server === undefined || session.serverId === urlParams.server)
              .filter((session) => q === undefined || q === "" || (session.name ?? "").toLowerCase().includes(q) || matchesPlayer(session, q))
              .sort((a, b) => a.since - b.since)
              .map(playerView)
          })
        )
        .handle("get", ({ path }) => Effect.map(matching(path.player), (sessions) => sessions.map(playerView)))
        .handle("kick", ({ path, payload }) =>
          Effect.gen(function* () {
            yield* matching(path.player)
            const reason = payload.reason !== undefined && payload.reason.trim() !== "" ? payload.reason : DEFAULT_KICK_REASON
            const kicked = yield* registry.endWhere((session) => matchesPlayer(session, path.player), reason)
            yield* Effect.logInfo(`admin API: kicked ${path.player} (${kicked} session(s)): ${reason}`)
            return { kicked }
          })
        )
    })
  )

  const Servers = HttpApiBuilder.group(AdminApi, "servers", (handlers) =>
    Effect.gen(function* () {
      const manager = yield* ServerManager
      const editor = yield* ConfigEditor
      const command = (id: string, which: "start" | "stop") =>
        Effect.gen(function* () {
          if (Option.isNone(yield* views.server(id))) return yield* Effect.fail(notFound("server", id))
          const run = which === "start" ? manager.start(id, "started through the admin API") : manager.stop(id, "stopped through the admin API")
          const result = yield* run.pipe(
            Effect.mapError((error) => new Conflict({ error: errorBody("not_managed", `${error.reason}: it cannot be started or stopped`) }))
          )
          return { id, ...result }
        })
      return handlers
        .handle("list", () => views.servers)
        .handle("get", ({ path }) =>
          Effect.flatMap(views.server(path.id), Option.match({ onNone: () => Effect.fail(notFound("server", path.id)), onSome: Effect.succeed }))
        )
        .handle("start", ({ path }) => command(path.id, "start"))
        .handle("stop", ({ path }) => command(path.id, "stop"))
        .handle("config", ({ path }) =>
          editor.serverText(path.id).pipe(
            Effect.catchTag("ConfigWriteError", internal("cannot read the server file")),
            Effect.flatMap(
              Option.match({
                onNone: () => Effect.fail(notFound("server file", path.id)),
                onSome: (found) => Effect.succeed(found.text)
              })
            )
          )
        )
        .handleRaw("validate", ({ request, urlParams }) =>
          Effect.gen(function* () {
            const text = yield* readToml(request)
            const problems = yield* editor.checkServer(urlParams.id, text)
            return { valid: problems.length === 0, problems }
          })
        )
        .handleRaw("put", ({ request, path }) =>
          Effect.gen(function* () {
            const text = yield* readToml(request)
            const written = yield* editor.writeServer(path.id, text).pipe(
              Effect.catchTags({
                ConfigError: (error) => Effect.fail(invalidConfig(error.problems)),
                ConfigWriteError: internal("cannot write the server file")
              })
            )
            const server = yield* views.server(path.id)
            return { id: path.id, created: written.created, applied: written.applied, server: Option.getOrNull(server) }
          })
        )
        .handle("remove", ({ path }) =>
          editor.removeServer(path.id).pipe(
            Effect.catchTag("ConfigWriteError", internal("cannot remove the server file")),
            Effect.flatMap((removed) => (removed ? Effect.void : Effect.fail(notFound("server file", path.id))))
          )
        )
    })
  )

  const Bans = HttpApiBuilder.group(AdminApi, "bans", (handlers) =>
    Effect.gen(function* () {
      const bans = yield* BanStore
      return handlers
        .handle("list", ({ urlParams }) =>
          Effect.map(bans.list, (list) => list.filter((ban) => urlParams.type === undefined || ban.target.type === urlParams.type).map(banView))
        )
        .handle("check", ({ urlParams }) =>
          Effect.gen(function* () {
            const given = (["ip", "username", "uuid"] as const).filter((type) => urlParams[type] !== undefined)
            if (given.length !== 1) return yield* Effect.fail(badRequest("bad_request", "give exactly one of ip, username or uuid"))
            const type = given[0]!
            const target = yield* Either.mapLeft(normaliseTarget({ type, value: urlParams[type]! }), (reason) => badRequest("invalid_target", reason))
            if (target.type === "ip" && target.value.includes("/")) {
              return yield* Effect.fail(badRequest("invalid_target", `ip takes one address, not the range ${target.value}: GET /bans?type=ip lists the ranges banned`))
            }
            const ban = yield* bans.check(target).pipe(Effect.mapError((error) => badRequest("invalid_target", error.reason)))
            return { banned: ban !== undefined, ban: ban === undefined ? null : banView(ban) }
          })
        )
        .handle("create", ({ payload }) =>
          Effect.gen(function* () {
            const target = yield* Either.mapLeft(normaliseTarget(payload.target), (reason) => badRequest("invalid_target", reason))
            const duration =
              payload.duration === undefined
                ? undefined
                : yield* Either.mapLeft(decodeDuration(payload.duration), () =>
                    badRequest("invalid_duration", `${JSON.stringify(payload.duration)} is not a duration (for example 30m, 7d, 1h30m)`)
                  )
            const problem = duration === undefined ? undefined : banDurationProblem(duration)
            if (problem !== undefined) return yield* Effect.fail(badRequest("invalid_duration", problem))
            const ban = yield* bans
              .add({ target, reason: payload.reason ?? "", source: API_SOURCE, ...(duration !== undefined ? { duration } : {}) })
              .pipe(Effect.catchTag("BanStoreError", internal("cannot record the ban")))
            return banView(ban)
          })
        )
        .handle("remove", ({ path }) =>
          Effect.gen(function* () {
            const target = yield* Either.mapLeft(normaliseTarget(path), (reason) => badRequest("invalid_target", reason))
            const removed = yield* bans.remove(target, API_SOURCE).pipe(Effect.catchTag("BanStoreError", internal("cannot record the change")))
            if (!removed) return yield* Effect.fail(new NotFound({ error: errorBody("not_found", `no ban in force for ${target.type} ${target.value}`) }))
          })
        )
    })
  )

  const Config = HttpApiBuilder.group(AdminApi, "config", (handlers) =>
    Effect.gen(function* () {
      const editor = yield* ConfigEditor
      return handlers
        .handle("get", () => views.configView)
        .handle("raw", () => editor.globalText.pipe(Effect.catchTag("ConfigWriteError", internal("cannot read proxy.toml"))))
        .handleRaw("putRaw", ({ request }) =>
          Effect.gen(function* () {
            const text = yield* readToml(request)
            const written = yield* editor.writeGlobal(text).pipe(
              Effect.catchTags({
                ConfigError: (error) => Effect.fail(invalidConfig(error.problems)),
                ConfigWriteError: internal("cannot write proxy.toml")
              })
            )
            return { restart_required: written.restartRequired }
          })
        )
        .handle("reload", () =>
          Effect.gen(function* () {
            const reloaded = yield* editor.reload
            if (reloaded.problems.length > 0) {
              return yield* Effect.fail(
                badRequest("invalid_config", `proxy.toml has ${reloaded.problems.length} problem(s); the running configuration is kept`, {
                  problems: reloaded.problems
                })
              )
            }
            return { revision: (yield* views.configView).revision, restart_required: reloaded.restartRequired }
          })
        )
    })
  )

  return Layer.mergeAll(Health, Proxy, Players, Servers, Bans, Config)
}
