/**
 * What the admin API's requests and answers look like: the schemas the contract (api.ts) is made of. JSON keys are
 * snake_case like the configuration and the ban file; times are epoch seconds where the ban file has them, ISO 8601
 * text elsewhere.
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Data from "effect/Data"
import * as Schema from "effect/Schema"

// ---------------------------------------------------------------------------------------------------------------
// Errors: every failure answers `{"error":{"code","message","details"?}}`, one class per status.

export const ErrorBody = Schema.Struct({
  code: Schema.String,
  message: Schema.String,
  details: Schema.optionalWith(Schema.Unknown, { exact: true })
}).annotations({ identifier: "ErrorBody" })
export type ErrorBody = typeof ErrorBody.Type

/**
 * An error of the API: a tagged error on the server's side (so that a handler can fail with it, and each class keeps
 * its own status), the bare `{"error":{...}}` on the wire. The type side checks the class, not the shape: every
 * error has the same shape, and a structural match would give them all the first one's status.
 */
const apiError = <E extends { readonly error: ErrorBody }>(
  Class: new (args: { readonly error: ErrorBody }) => E,
  identifier: string,
  status: number
) =>
  Schema.transform(Schema.Struct({ error: ErrorBody }), Schema.instanceOf(Class), {
    strict: true,
    decode: (encoded) => new Class({ error: encoded.error }),
    encode: (error) => ({ error: error.error })
  }).annotations({ identifier, ...HttpApiSchema.annotations({ status }) })

export class BadRequest extends Data.TaggedError("BadRequest")<{ readonly error: ErrorBody }> {}
export class Unauthorized extends Data.TaggedError("Unauthorized")<{ readonly error: ErrorBody }> {}
export class NotFound extends Data.TaggedError("NotFound")<{ readonly error: ErrorBody }> {}
export class Conflict extends Data.TaggedError("Conflict")<{ readonly error: ErrorBody }> {}
export class PayloadTooLarge extends Data.TaggedError("PayloadTooLarge")<{ readonly error: ErrorBody }> {}
export class UnsupportedMediaType extends Data.TaggedError("UnsupportedMediaType")<{ readonly error: ErrorBody }> {}
export class TooManyRequests extends Data.TaggedError("TooManyRequests")<{ readonly error: ErrorBody }> {}
export class InternalError extends Data.TaggedError("InternalError")<{ readonly error: ErrorBody }> {}
export class ServiceUnavailable extends Data.TaggedError("ServiceUnavailable")<{ readonly error: ErrorBody }> {}

export const BadRequestError = apiError(BadRequest, "BadRequest", 400)
export const UnauthorizedError = apiError(Unauthorized, "Unauthorized", 401)
export const NotFoundError = apiError(NotFound, "NotFound", 404)
export const ConflictError = apiError(Conflict, "Conflict", 409)
export const PayloadTooLargeError = apiError(PayloadTooLarge, "PayloadTooLarge", 413)
export const UnsupportedMediaTypeError = apiError(UnsupportedMediaType, "UnsupportedMediaType", 415)
export const TooManyRequestsError = apiError(TooManyRequests, "TooManyRequests", 429)
export const InternalErrorSchema = apiError(InternalError, "InternalError", 500)
export const ServiceUnavailableError = apiError(ServiceUnavailable, "ServiceUnavailable", 503)

/** The body of an error, for places that build one by hand (the edge, the handlers). */
export const errorBody = (code: string, message: string, details?: unknown): ErrorBody =>
  details === undefined ? { code, message } : { code, message, details }

export const badRequest = (code: string, message: string, details?: unknown) => new BadRequest({ error: errorBody(code, message, details) })
export const notFound = (what: string, id: string) => new NotFound({ error: errorBody("not_found", `no ${what} ${JSON.stringify(id)}`) })

// ---------------------------------------------------------------------------------------------------------------
// Configuration problems, as `--check` lists them.

export const Problem = Schema.Struct({
  file: Schema.String,
  /** Dotted key path, "" for the whole file. */
  path: Schema.String,
  message: Schema.String
}).annotations({ identifier: "Problem" })

/** A TOML file's text: sent as `application/toml` (`text/plain` is accepted too). */
export const TomlText = HttpApiSchema.Text({ contentType: "application/toml" }).annotations({ identifier: "TomlText" })

/** Metrics in Prometheus' text exposition format (version 0.0.4). */
export const PrometheusText = HttpApiSchema.Text({ contentType: "text/plain; version=0.0.4; charset=utf-8" }).annotations({
  identifier: "PrometheusText"
})

// ---------------------------------------------------------------------------------------------------------------
// Portal itself.

export const Health = Schema.Struct({ status: Schema.Literal("ok") }).annotations({ identifier: "Health" })

export const InactiveFeature = Schema.Struct({ where: Schema.String, what: Schema.String }).annotations({ identifier: "InactiveFeature" })

export const ProxyInfo = Schema.Struct({
  version: Schema.String,
  started_at: Schema.String,
  uptime_seconds: Schema.Number,
  bind: Schema.String,
  web_bind: Schema.String,
  workers: Schema.Struct({
    /** `worker_threads` as configured (0 = one per core). */
    configured: Schema.Number,
    /** Threads relaying connections now. */
    running: Schema.Number
  }),
  players_online: Schema.Number,
  servers: Schema.Number,
  features: Schema.Struct({
    active: Schema.Array(Schema.String),
    inactive: Schema.Array(InactiveFeature)
  })
}).annotations({ identifier: "ProxyInfo" })

const PerSecond = Schema.Struct({ total: Schema.Number, per_second: Schema.Number })

export const StatsView = Schema.Struct({
  at: Schema.String,
  uptime_seconds: Schema.Number,
  connections: Schema.Struct({
    total: Schema.Number,
    active: Schema.Number,
    rejected: Schema.Record({ key: Schema.String, value: Schema.Number })
  }),
  logins: PerSecond,
  pings: PerSecond,
  players_online: Schema.Number,
  /** Bytes from (`in`) and to (`out`) players: ended sessions plus the live ones. */
  bytes: Schema.Struct({ in: Schema.Number, out: Schema.Number }),
  status_cache: Schema.Struct({ hits: Schema.Number, misses: Schema.Number, stale: Schema.Number })
}).annotations({ identifier: "Stats" })
export type StatsView = typeof StatsView.Type

// ---------------------------------------------------------------------------------------------------------------
// Players.

export const PlayerView = Schema.Struct({
  id: Schema.Number,
  name: Schema.NullOr(Schema.String),
  uuid: Schema.NullOr(Schema.String),
  address: Schema.String,
  port: Schema.Number,
  server: Schema.String,
  backend: Schema.NullOr(Schema.String),
  protocol_version: Schema.Number,
  since: Schema.String,
  bytes_in: Schema.Number,
  bytes_out: Schema.Number
}).annotations({ identifier: "Player" })
export type PlayerView = typeof PlayerView.Type

export const PlayerQuery = Schema.Struct({
  server: Schema.optionalWith(Schema.String, { exact: true }),
  /** Part of the name, any case. */
  q: Schema.optionalWith(Schema.String, { exact: true })
})

export const PlayerPath = Schema.Struct({ player: Schema.String.annotations({ description: "a player name or UUID" }) })

const KickFields = Schema.Struct({
  reason: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(256)), { exact: true })
})

/** `{"reason"?}`; a kick sent without a body (read as `null`) is a kick with the default reason. */
export const KickRequest = Schema.transform(Schema.NullOr(KickFields), Schema.typeSchema(KickFields), {
  strict: true,
  decode: (body) => body ?? {},
  encode: (request) => request
}).annotations({ identifier: "KickRequest" })

export const KickResult = Schema.Struct({ kicked: Schema.Number }).annotations({ identifier: "KickResult" })

// ---------------------------------------------------------------------------------------------------------------
// Servers.

export const ServerState = Schema.Literal("online", "offline", "sleeping", "starting", "crashed", "stopping", "unreachable")

export const AddressView = Schema.Struct({
  address: Schema.String,
  weight: Schema.Number,
  active: Schema.Number,
  healthy: Schema.Boolean,
  /** Passively ejected after failed connects (tried last until the back-off ends). */
  ejected: Schema.Boolean,
  failures: Schema.Number
}).annotations({ identifier: "Address" })

export const ServerView = Schema.Struct({
  id: Schema.String,
  /** Where the definition comes from: a server file, or the labels of a container (`[containers]`). */
  source: Schema.Literal("file", "container"),
  /** The file's path, or `container <name> (<short id>)` as messages name it. */
  file: Schema.String,
  /** The container a discovered server comes from; null for a file. */
  container: Schema.NullOr(Schema.Struct({ name: Schema.String, id: Schema.String })),
  domains: Schema.Array(Schema.String),
  state: ServerState,
  state_reason: Schema.NullOr(Schema.String),
  /** Has a `[server_manager]`: can be started and stopped. */
  managed: Schema.Boolean,
  players: Schema.Number,
  max_players: Schema.Number,
  proxy_mode: Schema.String,
  addresses: Schema.Array(AddressView)
}).annotations({ identifier: "Server" })
export type ServerView = typeof ServerView.Type

export const ServerPath = Schema.Struct({ id: Schema.String })

export const CommandResult = Schema.Struct({
  id: Schema.String,
  /** False when the server's state did not allow it (already online, already stopping, ...). */
  begun: Schema.Boolean,
  state: ServerState,
  reason: Schema.String
}).annotations({ identifier: "CommandResult" })

export const ServerWriteResult = Schema.Struct({
  id: Schema.String,
  created: Schema.Boolean,
  /** The server is in the configuration in force (false only if another change got in between). */
  applied: Schema.Boolean,
  server: Schema.NullOr(ServerView)
}).annotations({ identifier: "ServerWriteResult" })

export const ValidateQuery = Schema.Struct({
  /** The id the file would have (its name without `.toml`); `new` by default. */
  id: Schema.optionalWith(Schema.String, { exact: true })
})

export const ValidationResult = Schema.Struct({
  valid: Schema.Boolean,
  problems: Schema.Array(Problem)
}).annotations({ identifier: "ValidationResult" })

// ---------------------------------------------------------------------------------------------------------------
// Bans.

export const BanTargetType = Schema.Literal("ip", "username", "uuid")

export const BanTarget = Schema.Struct({ type: BanTargetType, value: Schema.String }).annotations({ identifier: "BanTarget" })

export const BanView = Schema.Struct({
  target: BanTarget,
  reason: Schema.String,
  /** Epoch seconds. */
  created_at: Schema.Number,
  /** Epoch seconds; null for a permanent ban. */
  expires_at: Schema.NullOr(Schema.Number),
  source: Schema.String
}).annotations({ identifier: "Ban" })
export type BanView = typeof BanView.Type

export const BanQuery = Schema.Struct({ type: Schema.optionalWith(BanTargetType, { exact: true }) })

export const BanRequest = Schema.Struct({
  target: BanTarget,
  reason: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(256)), { exact: true }),
  /** A duration as in the configuration (`30m`, `7d`, `1h30m`); absent: permanent. */
  duration: Schema.optionalWith(Schema.String, { exact: true })
}).annotations({ identifier: "BanRequest" })

export const BanPath = Schema.Struct({ type: BanTargetType, value: Schema.String })

export const BanCheckQuery = Schema.Struct({
  ip: Schema.optionalWith(Schema.String, { exact: true }),
  username: Schema.optionalWith(Schema.String, { exact: true }),
  uuid: Schema.optionalWith(Schema.String, { exact: true })
})

export const BanCheck = Schema.Struct({ banned: Schema.Boolean, ban: Schema.NullOr(BanView) }).annotations({ identifier: "BanCheck" })

// ---------------------------------------------------------------------------------------------------------------
// Configuration.

export const ConfigView = Schema.Struct({
  file: Schema.String,
  revision: Schema.Number,
  /** `proxy.toml` as decoded (defaults filled in), every secret replaced by "<redacted>". */
  global: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  /** Each server file as decoded, secrets redacted. */
  servers: Schema.Record({ key: Schema.String, value: Schema.Unknown })
}).annotations({ identifier: "Config" })

export const ConfigWriteResult = Schema.Struct({
  /** Options that changed but apply only after a restart. */
  restart_required: Schema.Array(Schema.String)
}).annotations({ identifier: "ConfigWriteResult" })

export const ReloadResult = Schema.Struct({
  revision: Schema.Number,
  restart_required: Schema.Array(Schema.String)
}).annotations({ identifier: "ReloadResult" })

export const EventStream = HttpApiSchema.Text({ contentType: "text/event-stream" }).annotations({
  identifier: "EventStream",
  description: "server-sent events: player.join, player.leave, server.state, backend.health, ban.created, ban.removed, config.reload, stats"
})

export const OpenApiDocument = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({ identifier: "OpenApiDocument" })
