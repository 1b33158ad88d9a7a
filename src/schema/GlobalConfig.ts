/** The global file, `proxy.toml`: every table, option and default of the specification. */
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import {
  ACTIVE_HEALTH_KINDS,
  emptyTable,
  ForwardingMode,
  hostPortSchema,
  IpFilter,
  MotdTable,
  NonEmptyString,
  NonNegativeInt,
  oneOf,
  optional,
  PlayerRef,
  PluginId,
  PositiveInt,
  urlWithSchemes,
  withDefault
} from "./common.js"
import { DEFAULT_CONTAINER_ENDPOINT, parseContainerEndpoint } from "./ContainerEndpoint.js"
import { DurationString, PositiveDuration, TimerDuration } from "./Duration.js"

export const PORTAL_VERSION = "0.1.0"

export const RateLimit = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  max_connections: withDefault(PositiveInt, () => 3),
  window: withDefault(PositiveDuration, () => Duration.seconds(10)),
  status_max: withDefault(PositiveInt, () => 300),
  status_window: withDefault(PositiveDuration, () => Duration.seconds(10))
}).annotations({ identifier: "RateLimit" })

export const StatusCache = Schema.Struct({
  ttl: withDefault(DurationString, () => Duration.seconds(5)),
  max_entries: withDefault(NonNegativeInt, () => 1000)
}).annotations({ identifier: "StatusCache" })

export const Keepalive = Schema.Struct({
  time: withDefault(DurationString, () => Duration.seconds(30)),
  interval: withDefault(DurationString, () => Duration.seconds(10)),
  retries: withDefault(NonNegativeInt, () => 3)
}).annotations({ identifier: "Keepalive" })

export const Ban = Schema.Struct({
  file: withDefault(NonEmptyString, () => "bans.json"),
  purge_interval: withDefault(TimerDuration, () => Duration.seconds(300)),
  enable_audit_log: withDefault(Schema.Boolean, () => true)
}).annotations({ identifier: "Ban" })

/** `[containers].endpoint`, kept as written; services/ContainerDiscovery.ts parses it the same way. */
const ContainerEndpointText = Schema.String.pipe(
  Schema.filter((text) => Either.match(parseContainerEndpoint(text), { onLeft: (reason) => reason, onRight: () => true }))
).annotations({ identifier: "ContainerEndpoint" })

export const Containers = Schema.Struct({
  endpoint: withDefault(ContainerEndpointText, () => DEFAULT_CONTAINER_ENDPOINT),
  network: optional(NonEmptyString),
  poll_interval: withDefault(TimerDuration, () => Duration.seconds(30)),
  reconnect_delay: withDefault(TimerDuration, () => Duration.seconds(5))
}).annotations({ identifier: "Containers" })

export const TelemetryMetrics = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => true),
  export_interval: withDefault(TimerDuration, () => Duration.seconds(15))
}).annotations({ identifier: "TelemetryMetrics" })

export const TelemetryTraces = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => true),
  sampling_ratio: withDefault(
    Schema.Number.pipe(
      Schema.between(0, 1, { message: (issue) => `expected a number between 0.0 and 1.0, got ${String(issue.actual)}` })
    ),
    () => 0.1
  )
}).annotations({ identifier: "TelemetryTraces" })

export const TelemetryResource = Schema.Struct({
  service_name: withDefault(NonEmptyString, () => "proxy"),
  service_version: withDefault(NonEmptyString, () => PORTAL_VERSION)
}).annotations({ identifier: "TelemetryResource" })

export const Telemetry = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  endpoint: optional(urlWithSchemes(["http", "https", "grpc", "grpcs"], true)),
  protocol: withDefault(oneOf("grpc", "http"), () => "grpc" as const),
  metrics: withDefault(TelemetryMetrics, emptyTable(TelemetryMetrics)),
  traces: withDefault(TelemetryTraces, emptyTable(TelemetryTraces)),
  resource: withDefault(TelemetryResource, emptyTable(TelemetryResource))
}).annotations({ identifier: "Telemetry" })

/** Subchannels of the legacy plugin-messaging channel and whether each is answered by default. */
export const CHANNEL_DEFAULTS = {
  Connect: true,
  ConnectOther: false,
  IP: true,
  IPOther: true,
  PlayerCount: true,
  PlayerList: true,
  GetServers: true,
  GetServer: true,
  GetPlayerServer: true,
  Message: false,
  MessageRaw: false,
  UUID: true,
  UUIDOther: true,
  ServerIP: true,
  KickPlayer: false,
  KickPlayerRaw: false,
  Forward: true,
  ForwardToPlayer: true
} as const satisfies Record<string, boolean>

export const ChannelPermissions = Schema.Struct(
  Object.fromEntries(
    Object.entries(CHANNEL_DEFAULTS).map(([name, enabled]) => [name, withDefault(Schema.Boolean, () => enabled)])
  ) as { [K in keyof typeof CHANNEL_DEFAULTS]: ReturnType<typeof withDefault<boolean, boolean, never>> }
).annotations({ identifier: "ChannelPermissions" })

export const Forwarding = Schema.Struct({
  mode: withDefault(ForwardingMode, () => "none" as const),
  secret_file: withDefault(NonEmptyString, () => "forwarding.secret"),
  legacy_channel: withDefault(Schema.Boolean, () => true),
  channel_permissions: withDefault(ChannelPermissions, emptyTable(ChannelPermissions))
}).annotations({ identifier: "Forwarding" })

export const WebRateLimit = Schema.Struct({
  requests_per_minute: withDefault(PositiveInt, () => 60)
}).annotations({ identifier: "WebRateLimit" })

export const WEB_KEY_MIN_LENGTH = 16
export const WEB_KEY_PLACEHOLDER = "CHANGE-ME"

const ORIGIN_SHAPE = 'expected an origin such as "https://admin.example.com" or "http://127.0.0.1:3000"'

/**
 * A CORS origin, compared with the browser's `Origin` header as it sends it: scheme, host and a port other than the
 * scheme's own, lower-cased, without a path. A near miss (`admin.example.com`, a trailing `/`, `*`) would otherwise
 * never match, and the allowed page would get no CORS answer with nothing said.
 */
export const CorsOrigin = Schema.transformOrFail(Schema.String, Schema.String, {
  strict: true,
  decode: (text, _, ast) => {
    const fail = (why: string) => ParseResult.fail(new ParseResult.Type(ast, text, `${JSON.stringify(text)} ${why}; ${ORIGIN_SHAPE}`))
    if (text.trim() === "*") return fail("is not accepted: list each origin allowed")
    let url: URL
    try {
      url = new URL(text.trim())
    } catch {
      return fail("is not an origin")
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return fail(`has scheme "${url.protocol.replace(/:$/, "")}"`)
    if (url.username.length > 0 || url.password.length > 0) return fail("holds credentials")
    if (url.pathname !== "/" || url.search.length > 0 || url.hash.length > 0 || /[?#]/.test(text)) return fail("has a path, query or fragment")
    return ParseResult.succeed(url.origin)
  },
  encode: ParseResult.succeed
}).annotations({ identifier: "CorsOrigin" })

/** `[web]`; `enable_webui` stays absent when not written so that it can follow `enable_api`. */
export const Web = Schema.Struct({
  enable_api: withDefault(Schema.Boolean, () => true),
  enable_webui: optional(Schema.Boolean),
  bind: withDefault(hostPortSchema({ allowPortZero: true }), () => ({ host: "127.0.0.1", port: 8080 })),
  api_key: optional(Schema.String),
  cors_origins: withDefault(Schema.Array(CorsOrigin), () => []),
  rate_limit: withDefault(WebRateLimit, emptyTable(WebRateLimit))
}).annotations({ identifier: "Web" })

export const Permissions = Schema.Struct({
  admins: withDefault(Schema.Array(PlayerRef), () => []),
  player_commands: withDefault(Schema.Array(NonEmptyString), () => [])
}).annotations({ identifier: "Permissions" })

export const PLUGIN_PERMISSIONS = ["limbo", "command"] as const

export const Plugin = Schema.Struct({
  path: optional(NonEmptyString),
  permissions: withDefault(Schema.Array(oneOf(...PLUGIN_PERMISSIONS)), () => []),
  enabled: optional(Schema.Boolean)
}).annotations({ identifier: "Plugin" })

export const ActiveHealth = Schema.Struct({
  enabled: withDefault(Schema.Boolean, () => false),
  kind: withDefault(oneOf(...ACTIVE_HEALTH_KINDS), () => "tcp" as const),
  interval: withDefault(TimerDuration, () => Duration.seconds(10)),
  unhealthy_interval: withDefault(TimerDuration, () => Duration.seconds(5)),
  timeout: withDefault(TimerDuration, () => Duration.seconds(2)),
  max_concurrent: withDefault(PositiveInt, () => 16)
}).annotations({ identifier: "ActiveHealth" })
export type ActiveHealth = typeof ActiveHealth.Type

export const GlobalConfig = Schema.Struct({
  bind: withDefault(hostPortSchema({ defaultPort: 25565, allowPortZero: true }), () => ({ host: "0.0.0.0", port: 25565 })),
  max_connections: withDefault(NonNegativeInt, () => 0),
  connect_timeout: withDefault(TimerDuration, () => Duration.seconds(5)),
  connect_max_attempts: withDefault(NonNegativeInt, () => 3),
  receive_proxy_protocol: withDefault(Schema.Boolean, () => false),
  servers_dir: withDefault(NonEmptyString, () => "./servers"),
  plugins_dir: withDefault(NonEmptyString, () => "./plugins"),
  worker_threads: withDefault(NonNegativeInt, () => 0),
  so_reuseport: withDefault(Schema.Boolean, () => false),
  unknown_domain_behavior: withDefault(oneOf("default_motd", "drop"), () => "default_motd" as const),
  announce_proxy_commands: withDefault(Schema.Boolean, () => true),
  rate_limit: withDefault(RateLimit, emptyTable(RateLimit)),
  status_cache: withDefault(StatusCache, emptyTable(StatusCache)),
  keepalive: withDefault(Keepalive, emptyTable(Keepalive)),
  ban: withDefault(Ban, emptyTable(Ban)),
  default_motd: withDefault(MotdTable, () => ({})),
  containers: optional(Containers),
  telemetry: optional(Telemetry),
  ip_filter: withDefault(IpFilter, emptyTable(IpFilter)),
  forwarding: withDefault(Forwarding, emptyTable(Forwarding)),
  web: optional(Web),
  permissions: withDefault(Permissions, emptyTable(Permissions)),
  plugins: withDefault(Schema.Record({ key: PluginId, value: Plugin }), () => ({})),
  active_health: withDefault(ActiveHealth, emptyTable(ActiveHealth))
}).annotations({ identifier: "GlobalFile" })

export type GlobalConfig = typeof GlobalConfig.Type
export type GlobalConfigInput = typeof GlobalConfig.Encoded
