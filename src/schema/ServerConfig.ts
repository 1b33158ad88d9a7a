/** A server file, `<servers_dir>/<file>.toml`: one backend server. */
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import {
  ACTIVE_HEALTH_KINDS,
  emptyTable,
  ForwardingMode,
  IpFilter,
  MotdTable,
  NonEmptyString,
  NonNegativeInt,
  oneOf,
  optional,
  PluginId,
  PositiveInt,
  urlWithSchemes,
  withDefault
} from "./common.js"
import { DurationString, TimerDuration } from "./Duration.js"
import { formatHostPort, isValidHost, parseHostPort } from "./HostPort.js"

export const DEFAULT_BACKEND_PORT = 25565
export const DEFAULT_DISCONNECT_MESSAGE = "Server is currently unreachable. Please try again later."
export const SERVER_NAME_PATTERN = /^[a-z0-9_-]+$/

export const PROXY_MODES = ["passthrough", "zero_copy", "client_only", "offline", "server_only"] as const
export type ProxyMode = (typeof PROXY_MODES)[number]

export const BALANCE_STRATEGIES = ["first_available", "round_robin", "least_conn"] as const
export type BalanceStrategy = (typeof BALANCE_STRATEGIES)[number]

/** A routed domain: `play.example.com` or a wildcard `*.example.com`; stored lower-cased without a trailing dot. */
export const Domain = Schema.transformOrFail(Schema.String, Schema.String, {
  strict: true,
  decode: (text, _, ast) => {
    const value = text.trim().toLowerCase().replace(/\.$/, "")
    const host = value.startsWith("*.") ? value.slice(2) : value
    if (host.length === 0 || host.includes("*") || !isValidHost(host)) {
      return ParseResult.fail(
        new ParseResult.Type(ast, text, `${JSON.stringify(text)} is not a domain (expected "play.example.com" or "*.example.com")`)
      )
    }
    return ParseResult.succeed(value)
  },
  encode: ParseResult.succeed
}).annotations({ identifier: "Domain" })

export interface BackendAddress {
  readonly host: string
  readonly port: number
  readonly weight: number
}

const ADDRESS_SHAPE = 'expected "host:port" or { address = "host:port", weight = N }'

const AddressTable = Schema.Struct({
  address: Schema.String,
  weight: withDefault(NonNegativeInt, () => 1)
}).annotations({ identifier: "AddressTable", message: (issue) => `${ADDRESS_SHAPE}, got ${JSON.stringify(issue.actual)}` })

const decodeAddressText = (text: string, weight: number, ast: Schema.Schema.AnyNoContext["ast"]) =>
  Either.match(parseHostPort(text, { defaultPort: DEFAULT_BACKEND_PORT }), {
    onLeft: (reason) => ParseResult.fail(new ParseResult.Type(ast, text, reason)),
    onRight: ({ host, port }): Either.Either<BackendAddress, ParseResult.ParseIssue> => ParseResult.succeed({ host, port, weight })
  })

/** `"host:port"` (weight 1) or `{ address = "host:port", weight = N }`; port 25565 when omitted. */
export const Address = Schema.transformOrFail(
  Schema.Union(
    Schema.String.annotations({ message: (issue) => `${ADDRESS_SHAPE}, got ${JSON.stringify(issue.actual)}` }),
    AddressTable
  ),
  Schema.Struct({ host: Schema.String, port: Schema.Number, weight: Schema.Number }),
  {
    strict: true,
    decode: (input, _, ast) =>
      typeof input === "string" ? decodeAddressText(input, 1, ast) : decodeAddressText(input.address, input.weight, ast),
    encode: (value) =>
      ParseResult.succeed({
        address: value.host.includes(":") ? `[${value.host}]:${value.port}` : `${value.host}:${value.port}`,
        weight: value.weight
      })
  }
).annotations({ identifier: "Address" })

/**
 * The first address written twice (`10.0.0.5`, `10.0.0.5:25565`): the balancer, the health checks and the attempts
 * would take it for one address listed twice, tried twice in a row when it is down; a weight says what was meant.
 */
const firstRepeatedAddress = (addresses: ReadonlyArray<BackendAddress>) => {
  const seen = new Set<string>()
  for (const [index, address] of addresses.entries()) {
    const key = formatHostPort(address)
    if (seen.has(key)) return { path: [index], message: `${key} is listed twice; give one entry a weight instead` }
    seen.add(key)
  }
  return true
}

/** A per-server `active_health` table: every key optional, the rest inherited from the global block. */
export const ActiveHealthOverride = Schema.Struct({
  enabled: optional(Schema.Boolean),
  kind: optional(oneOf(...ACTIVE_HEALTH_KINDS)),
  interval: optional(TimerDuration),
  unhealthy_interval: optional(TimerDuration),
  timeout: optional(TimerDuration),
  max_concurrent: optional(PositiveInt)
}).annotations({ identifier: "ActiveHealthOverride" })

const DOMAIN_REWRITE_SHAPE = 'expected "none", "from_backend" or { explicit = "<domain>" }'

export const DomainRewrite = Schema.Union(
  Schema.Literal("none", "from_backend").annotations({
    message: (issue) => ({ message: `${DOMAIN_REWRITE_SHAPE}, got ${JSON.stringify(issue.actual)}`, override: true })
  }),
  Schema.Struct({ explicit: Domain }).annotations({
    identifier: "ExplicitDomainRewrite",
    message: (issue) => `${DOMAIN_REWRITE_SHAPE}, got ${JSON.stringify(issue.actual)}`
  })
).annotations({ identifier: "DomainRewrite" })
export type DomainRewrite = typeof DomainRewrite.Type

/** `[timeouts]`: `connect` falls back to the global `connect_timeout` when not written. */
export const Timeouts = Schema.Struct({
  connect: optional(TimerDuration),
  read: withDefault(TimerDuration, () => Duration.seconds(30)),
  write: withDefault(TimerDuration, () => Duration.seconds(30))
}).annotations({ identifier: "Timeouts" })

export const LocalManager = Schema.Struct({
  type: Schema.Literal("local"),
  command: NonEmptyString,
  working_dir: NonEmptyString,
  args: withDefault(Schema.Array(Schema.String), () => []),
  ready_pattern: withDefault(NonEmptyString, () => 'For help, type "help"'),
  shutdown_timeout: withDefault(TimerDuration, () => Duration.seconds(30)),
  shutdown_after: optional(TimerDuration),
  start_timeout: withDefault(TimerDuration, () => Duration.seconds(60))
}).annotations({ identifier: "LocalServerManager" })

const remoteManager = <T extends "panel" | "controller">(type: T) =>
  Schema.Struct({
    type: Schema.Literal(type),
    api_url: urlWithSchemes(["http", "https"], false),
    api_key: NonEmptyString,
    server_id: NonEmptyString,
    shutdown_after: optional(TimerDuration),
    start_timeout: withDefault(TimerDuration, () => Duration.seconds(60)),
    poll_interval: withDefault(TimerDuration, () => Duration.seconds(5))
  })

export const PanelManager = remoteManager("panel").annotations({ identifier: "PanelServerManager" })
export const ControllerManager = remoteManager("controller").annotations({ identifier: "ControllerServerManager" })

export const ServerManager = Schema.Union(LocalManager, PanelManager, ControllerManager).annotations({
  identifier: "ServerManager"
})
export type ServerManagerConfig = typeof ServerManager.Type

export const ServerConfig = Schema.Struct({
  id: optional(NonEmptyString),
  name: optional(
    Schema.String.pipe(
      Schema.pattern(SERVER_NAME_PATTERN, {
        message: (issue) => `${JSON.stringify(issue.actual)} must match [a-z0-9_-]+ (lower-case letters, digits, "_" and "-")`
      })
    )
  ),
  network: optional(NonEmptyString),
  domains: withDefault(Schema.Array(Domain), () => []),
  addresses: Schema.Array(Address).pipe(
    Schema.minItems(1, { message: () => "expected at least one backend address" }),
    Schema.filter(firstRepeatedAddress)
  ),
  balance: withDefault(oneOf(...BALANCE_STRATEGIES), () => "first_available" as const),
  slow_start: optional(DurationString),
  slow_start_aggression: withDefault(
    Schema.Number.pipe(Schema.greaterThan(0, { message: (issue) => `expected a number > 0, got ${String(issue.actual)}` })),
    () => 1.0
  ),
  active_health: optional(ActiveHealthOverride),
  proxy_mode: withDefault(oneOf(...PROXY_MODES), () => "passthrough" as const),
  forwarding_mode: optional(ForwardingMode),
  send_proxy_protocol: withDefault(Schema.Boolean, () => false),
  domain_rewrite: withDefault(DomainRewrite, () => "none" as const),
  max_players: withDefault(NonNegativeInt, () => 0),
  disconnect_message: withDefault(Schema.String, () => DEFAULT_DISCONNECT_MESSAGE),
  limbo_handlers: withDefault(Schema.Array(PluginId), () => []),
  motd: withDefault(MotdTable, () => ({})),
  timeouts: withDefault(Timeouts, emptyTable(Timeouts)),
  ip_filter: withDefault(IpFilter, emptyTable(IpFilter)),
  server_manager: optional(ServerManager)
}).annotations({ identifier: "ServerFile" })

export type ServerConfig = typeof ServerConfig.Type
export type ServerConfigInput = typeof ServerConfig.Encoded
