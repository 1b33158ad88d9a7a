/**
 * The admin API's contract: every route under `/api/v1`, what it takes and answers. The single source of the OpenAPI
 * document (`GET /api/v1/openapi.json`), of the server's routing and decoding (handlers.ts) and of the typed client
 * (`HttpApiClient.make(AdminApi)`). Every group but `health` needs `Authorization: Bearer <api_key>`.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import { PORTAL_VERSION } from "../schema/GlobalConfig.js"
import {
  BadRequestError,
  BanCheck,
  BanCheckQuery,
  BanPath,
  BanQuery,
  BanRequest,
  BanView,
  CommandResult,
  ConfigView,
  ConfigWriteResult,
  ConflictError,
  EventStream,
  Health,
  InternalErrorSchema,
  KickRequest,
  KickResult,
  NotFoundError,
  OpenApiDocument,
  PayloadTooLargeError,
  PlayerPath,
  PlayerQuery,
  PlayerView,
  PrometheusText,
  ProxyInfo,
  ReloadResult,
  ServerPath,
  ServerView,
  ServerWriteResult,
  ServiceUnavailableError,
  StatsView,
  TomlText,
  TooManyRequestsError,
  UnauthorizedError,
  UnsupportedMediaTypeError,
  ValidateQuery,
  ValidationResult
} from "./schemas.js"

export const API_PREFIX = "/api/v1"

/** `Authorization: Bearer <api_key>`: a missing or wrong key is a 401. */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("Authorization", {
  failure: UnauthorizedError,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

export class HealthGroup extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("health", "/health")
      .addSuccess(Health)
      .addError(ServiceUnavailableError)
      .annotate(OpenApi.Description, "200 while Portal serves, 503 while it shuts down. Needs no key.")
  ) {}

export class ProxyGroup extends HttpApiGroup.make("proxy")
  .add(HttpApiEndpoint.get("info", "/proxy").addSuccess(ProxyInfo))
  .add(HttpApiEndpoint.get("stats", "/stats").addSuccess(StatsView))
  .add(
    HttpApiEndpoint.get("metrics", "/metrics")
      .addSuccess(PrometheusText)
      .addError(NotFoundError)
      .annotate(
        OpenApi.Description,
        "The telemetry metrics in Prometheus' text format; 404 unless [telemetry] is enabled with its metrics (docs/telemetry.md)."
      )
  )
  .add(HttpApiEndpoint.get("openapi", "/openapi.json").addSuccess(OpenApiDocument))
  .add(
    HttpApiEndpoint.get("events", "/events")
      .addSuccess(EventStream)
      .annotate(OpenApi.Description, "A live stream of server-sent events; `Last-Event-ID` resumes after an event still remembered.")
  )
  .middleware(Authorization) {}

export class PlayersGroup extends HttpApiGroup.make("players")
  .add(HttpApiEndpoint.get("list", "/players").setUrlParams(PlayerQuery).addSuccess(Schema.Array(PlayerView)))
  .add(HttpApiEndpoint.get("get", "/players/:player").setPath(PlayerPath).addSuccess(Schema.Array(PlayerView)).addError(NotFoundError))
  .add(
    HttpApiEndpoint.post("kick", "/players/:player/kick")
      .setPath(PlayerPath)
      .setPayload(KickRequest)
      .addSuccess(KickResult)
      .addError(NotFoundError)
  )
  .middleware(Authorization) {}

export class ServersGroup extends HttpApiGroup.make("servers")
  .add(HttpApiEndpoint.get("list", "/servers").addSuccess(Schema.Array(ServerView)))
  .add(HttpApiEndpoint.post("validate", "/servers/validate").setUrlParams(ValidateQuery).setPayload(TomlText).addSuccess(ValidationResult))
  .add(HttpApiEndpoint.get("get", "/servers/:id").setPath(ServerPath).addSuccess(ServerView).addError(NotFoundError))
  .add(HttpApiEndpoint.post("start", "/servers/:id/start").setPath(ServerPath).addSuccess(CommandResult).addError(NotFoundError).addError(ConflictError))
  .add(HttpApiEndpoint.post("stop", "/servers/:id/stop").setPath(ServerPath).addSuccess(CommandResult).addError(NotFoundError).addError(ConflictError))
  .add(HttpApiEndpoint.get("config", "/servers/:id/config").setPath(ServerPath).addSuccess(TomlText).addError(NotFoundError))
  .add(HttpApiEndpoint.put("put", "/servers/:id").setPath(ServerPath).setPayload(TomlText).addSuccess(ServerWriteResult))
  .add(HttpApiEndpoint.del("remove", "/servers/:id").setPath(ServerPath).addSuccess(HttpApiSchema.NoContent).addError(NotFoundError))
  .addError(UnsupportedMediaTypeError)
  .middleware(Authorization) {}

export class BansGroup extends HttpApiGroup.make("bans")
  .add(HttpApiEndpoint.get("list", "/bans").setUrlParams(BanQuery).addSuccess(Schema.Array(BanView)))
  .add(HttpApiEndpoint.get("check", "/bans/check").setUrlParams(BanCheckQuery).addSuccess(BanCheck))
  .add(HttpApiEndpoint.post("create", "/bans").setPayload(BanRequest).addSuccess(BanView, { status: 201 }))
  .add(HttpApiEndpoint.del("remove", "/bans/:type/:value").setPath(BanPath).addSuccess(HttpApiSchema.NoContent).addError(NotFoundError))
  .middleware(Authorization) {}

export class ConfigGroup extends HttpApiGroup.make("config")
  .add(HttpApiEndpoint.get("get", "/config").addSuccess(ConfigView))
  .add(HttpApiEndpoint.get("raw", "/config/raw").addSuccess(TomlText))
  .add(HttpApiEndpoint.put("putRaw", "/config/raw").setPayload(TomlText).addSuccess(ConfigWriteResult))
  .add(HttpApiEndpoint.post("reload", "/config/reload").addSuccess(ReloadResult))
  .addError(UnsupportedMediaTypeError)
  .middleware(Authorization) {}

const DECODE_ERROR_REF = "#/components/schemas/HttpApiDecodeError"

/** Drops the platform's decode-failure schema from a response schema: the edge answers those as `BadRequest`. */
const withoutDecodeError = (schema: unknown): unknown => {
  if (typeof schema !== "object" || schema === null || !("anyOf" in schema) || !Array.isArray(schema.anyOf)) return schema
  const rest: Array<unknown> = schema.anyOf.filter(
    (member: unknown) => !(typeof member === "object" && member !== null && "$ref" in member && member.$ref === DECODE_ERROR_REF)
  )
  return rest.length === 1 ? rest[0] : { ...schema, anyOf: rest }
}

/**
 * The document as clients see the API: a request that does not match the contract is answered in the one error shape
 * (`BadRequest`, see edge.ts), not in the platform's own shape, which the document would otherwise list for 400.
 */
const describeDecodeFailures = (spec: Record<string, any>): Record<string, any> => {
  for (const path of Object.values<Record<string, any>>(spec["paths"] ?? {})) {
    for (const operation of Object.values<Record<string, any>>(path)) {
      const json = operation?.["responses"]?.["400"]?.["content"]?.["application/json"]
      if (json !== undefined) json["schema"] = withoutDecodeError(json["schema"])
    }
  }
  const schemas = spec["components"]?.["schemas"]
  if (schemas !== undefined) for (const name of ["HttpApiDecodeError", "Issue", "PropertyKey"]) delete schemas[name]
  return spec
}

export class AdminApi extends HttpApi.make("portal")
  .add(HealthGroup)
  .add(ProxyGroup)
  .add(PlayersGroup)
  .add(ServersGroup)
  .add(BansGroup)
  .add(ConfigGroup)
  // Answered for any route: a bad request, a body too large, too many requests, a failure of Portal's own.
  .addError(BadRequestError)
  .addError(PayloadTooLargeError)
  .addError(TooManyRequestsError)
  .addError(InternalErrorSchema)
  .prefix(API_PREFIX)
  .annotate(OpenApi.Title, "Portal admin API")
  .annotate(OpenApi.Version, PORTAL_VERSION)
  .annotate(OpenApi.Transform, describeDecodeFailures) {}
