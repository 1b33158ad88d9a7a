/** Building blocks shared by the global and the server file schemas. */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { parseHostPort, type HostPort } from "./HostPort.js"
import { parseStrictAddress, parseStrictCidr } from "./ipAddress.js"
import { isPlayerName } from "./playerName.js"

/** An optional key with a default; `exact` keeps `undefined` out of the error messages. */
export const withDefault = <A, I, R>(schema: Schema.Schema<A, I, R>, value: () => NoInfer<A>) =>
  Schema.optionalWith(schema, { default: value, exact: true })

/** An optional key without a default (`none` in the specification). */
export const optional = <A, I, R>(schema: Schema.Schema<A, I, R>) => Schema.optionalWith(schema, { exact: true })

/** The decoded value of a table whose keys all have defaults, as if the table were empty. */
export const emptyTable = <A, I>(schema: Schema.Schema<A, I, never>) => (): A => Schema.decodeUnknownSync(schema)({})

export const NonNegativeInt = Schema.Int.pipe(
  Schema.greaterThanOrEqualTo(0, { message: (issue) => `expected an integer >= 0, got ${String(issue.actual)}` })
).annotations({ identifier: "NonNegativeInt" })

export const PositiveInt = Schema.Int.pipe(
  Schema.greaterThanOrEqualTo(1, { message: (issue) => `expected an integer >= 1, got ${String(issue.actual)}` })
).annotations({ identifier: "PositiveInt" })

export const NonEmptyString = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" })
).annotations({ identifier: "NonEmptyString" })

/** A string literal union whose error message lists the allowed values. */
export const oneOf = <const L extends ReadonlyArray<string>>(...values: L) =>
  Schema.Literal(...values).annotations({
    message: (issue) => ({
      message: `expected one of ${values.map((v) => JSON.stringify(v)).join(", ")}, got ${JSON.stringify(issue.actual)}`,
      override: true
    })
  })

/** `host:port` text decoded to `{ host, port }`. */
export const hostPortSchema = (options: { readonly defaultPort?: number; readonly allowPortZero?: boolean }) =>
  Schema.transformOrFail(
    Schema.String,
    Schema.Struct({ host: Schema.String, port: Schema.Number }),
    {
      strict: true,
      decode: (text, _, ast) =>
        Either.match(parseHostPort(text, options), {
          onLeft: (reason) => ParseResult.fail(new ParseResult.Type(ast, text, reason)),
          onRight: (value) => ParseResult.succeed(value)
        }),
      encode: (value: HostPort) =>
        ParseResult.succeed(value.host.includes(":") ? `[${value.host}]:${value.port}` : `${value.host}:${value.port}`)
    }
  ).annotations({ identifier: "HostPort" })

/** A CIDR range (`10.0.0.0/8`, `2001:db8::/32`) or a single address (taken as /32 or /128). */
export const Cidr = Schema.String.pipe(
  Schema.filter((text) => {
    const value = text.trim()
    if (value.includes("/")) {
      return (
        parseStrictCidr(value) !== undefined ||
        `${JSON.stringify(text)} is not a valid CIDR range (for example "10.0.0.0/8" or "2001:db8::/32")`
      )
    }
    return parseStrictAddress(value) !== undefined || `${JSON.stringify(text)} is not an IP address or CIDR range`
  })
).annotations({ identifier: "Cidr" })

/** A URL of the shape `<scheme>://<host>[:<port>][/path]` with one of the given schemes. */
export const urlWithSchemes = (schemes: ReadonlyArray<string>, requirePort: boolean) =>
  Schema.String.pipe(
    Schema.filter((text) => {
      let url: URL
      try {
        url = new URL(text)
      } catch {
        return `${JSON.stringify(text)} is not a URL of the shape <scheme>://<host>${requirePort ? ":<port>" : "[:<port>]"}`
      }
      const scheme = url.protocol.replace(/:$/, "")
      if (!schemes.includes(scheme)) {
        return `${JSON.stringify(text)} has scheme "${scheme}", expected one of ${schemes.map((s) => `"${s}"`).join(", ")}`
      }
      if (scheme === "unix") return url.pathname.length > 1 || `${JSON.stringify(text)} names no socket path`
      if (url.hostname.length === 0) return `${JSON.stringify(text)} has no host`
      // URL leaves out a port that is its scheme's default (https://host:443 has port ""): the text decides.
      const authority = text.slice(text.indexOf("//") + 2).split(/[/?#]/, 1)[0] ?? ""
      if (requirePort && !/:\d+$/.test(authority)) return `${JSON.stringify(text)} has no port (expected <scheme>://<host>:<port>)`
      // Paths are appended to it (/v1/traces, the panel's API routes): a query or fragment would swallow them.
      if (url.search.length > 0 || url.hash.length > 0 || /[?#]/.test(text)) return `${JSON.stringify(text)} has a query or fragment; give the URL without them`
      // Credentials in a URL end up in every log line that names it; each API takes its key in an option of its own.
      if (url.username.length > 0 || url.password.length > 0) return `${JSON.stringify(text)} holds credentials; give the URL without them`
      return true
    })
  ).annotations({ identifier: "Url" })

/** The id of a WASM plugin: a `[plugins.<id>]` key, and an entry of a server's `limbo_handlers`. */
export const PluginId = Schema.String.pipe(
  Schema.pattern(/^[a-z0-9_-]+$/, { message: (issue) => `${JSON.stringify(issue.actual)} is not a plugin id: plugin ids must match [a-z0-9_-]+` })
)

const PLAYER_UUID = /^(?:[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i

/** A player named by name (1 to 16 characters, no spaces) or by UUID (with or without dashes). */
export const PlayerRef = Schema.String.pipe(
  Schema.filter((text) =>
    isPlayerName(text) || PLAYER_UUID.test(text) ||
    `${JSON.stringify(text)} is neither a player name (1 to 16 characters, no spaces) nor a UUID (32 hex digits, with or without dashes)`
  )
).annotations({ identifier: "PlayerRef" })

export const IpFilter = Schema.Struct({
  whitelist: withDefault(Schema.Array(Cidr), () => []),
  blacklist: withDefault(Schema.Array(Cidr), () => [])
}).annotations({ identifier: "IpFilter" })
export type IpFilter = typeof IpFilter.Type

export const MOTD_STATES = ["online", "offline", "sleeping", "starting", "crashed", "stopping", "unreachable"] as const
export type ServerState = (typeof MOTD_STATES)[number]

export const MotdEntry = Schema.Struct({
  text: Schema.String,
  favicon: optional(Schema.String),
  version_name: optional(Schema.String),
  max_players: optional(NonNegativeInt)
}).annotations({ identifier: "MotdEntry" })
export type MotdEntry = typeof MotdEntry.Type

export const MotdTable = Schema.Struct({
  online: optional(MotdEntry),
  offline: optional(MotdEntry),
  sleeping: optional(MotdEntry),
  starting: optional(MotdEntry),
  crashed: optional(MotdEntry),
  stopping: optional(MotdEntry),
  unreachable: optional(MotdEntry)
}).annotations({ identifier: "MotdTable" })
export type MotdTable = typeof MotdTable.Type

export const FORWARDING_MODES = ["none", "legacy", "legacy_guard", "modern"] as const
export const ForwardingMode = oneOf(...FORWARDING_MODES)
export type ForwardingMode = typeof ForwardingMode.Type

export const ACTIVE_HEALTH_KINDS = ["tcp", "status_ping"] as const
