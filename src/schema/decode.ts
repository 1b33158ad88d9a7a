/**
 * From file text to checked configuration: TOML parsing, strict schema decoding and the rules that span
 * several keys or files. Pure: reading files, favicons and secrets is ConfigStore's job.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { parse as parseToml, TomlError } from "smol-toml"
import { GlobalConfig, WEB_KEY_MIN_LENGTH, WEB_KEY_PLACEHOLDER } from "./GlobalConfig.js"
import { isLoopbackHost } from "./HostPort.js"
import { type ConfigProblem, problemsFromParseError } from "./problems.js"
import { ServerConfig } from "./ServerConfig.js"

const STRICT = { onExcessProperty: "error", errors: "all" } as const

/** Parses TOML text; a syntax error names the file, line and column. */
export const parseTomlText = (file: string, text: string): Either.Either<Record<string, unknown>, Array<ConfigProblem>> => {
  try {
    return Either.right(parseToml(text) as Record<string, unknown>)
  } catch (error) {
    if (error instanceof TomlError) {
      const reason = error.message.split("\n")[0]!.replace(/^Invalid TOML document: /, "")
      return Either.left([{ file: `${file}:${error.line}:${error.column}`, path: "", message: `TOML syntax error: ${reason}` }])
    }
    return Either.left([{ file, path: "", message: `cannot parse: ${String(error)}` }])
  }
}

const decodeWith = <A, I>(schema: Schema.Schema<A, I, never>, file: string, raw: unknown) =>
  Either.mapLeft(Schema.decodeUnknownEither(schema, STRICT)(raw), (error) => problemsFromParseError(file, error))

/** Decodes `proxy.toml` and checks the rules that span several of its keys. */
export const decodeGlobalText = (file: string, text: string): Either.Either<GlobalConfig, Array<ConfigProblem>> =>
  Either.flatMap(parseTomlText(file, text), (raw) =>
    Either.flatMap(decodeWith(GlobalConfig, file, raw), (config) => {
      const problems = checkGlobalRules(file, config)
      return problems.length > 0 ? Either.left(problems) : Either.right(config)
    })
  )

/** The `[web]` rules of the specification's Authentication section. */
export const checkGlobalRules = (file: string, config: GlobalConfig): Array<ConfigProblem> => {
  const problems: Array<ConfigProblem> = []
  const web = config.web
  if (web !== undefined) {
    if (web.enable_webui === true && !web.enable_api) {
      problems.push({
        file,
        path: "web.enable_webui",
        message: "the web UI needs the API: enable_webui = true requires enable_api = true"
      })
    }
    const key = web.api_key
    if (key !== undefined && key !== WEB_KEY_PLACEHOLDER && key.length < WEB_KEY_MIN_LENGTH) {
      problems.push({
        file,
        path: "web.api_key",
        message: `must be at least ${WEB_KEY_MIN_LENGTH} characters long (got ${key.length})`
      })
    }
    if (web.enable_api && !isLoopbackHost(web.bind.host)) {
      if (key === undefined) {
        problems.push({
          file,
          path: "web.api_key",
          message: `is required because web.bind ${web.bind.host} is reachable from outside this host; set a key of at least ${WEB_KEY_MIN_LENGTH} characters`
        })
      } else if (key === WEB_KEY_PLACEHOLDER) {
        problems.push({
          file,
          path: "web.api_key",
          message: `is still the placeholder "${WEB_KEY_PLACEHOLDER}" while web.bind ${web.bind.host} is reachable from outside this host; set a real key of at least ${WEB_KEY_MIN_LENGTH} characters`
        })
      }
    } else if (key === WEB_KEY_PLACEHOLDER) {
      problems.push({
        file,
        path: "web.api_key",
        message: `is the placeholder "${WEB_KEY_PLACEHOLDER}"; set a real key of at least ${WEB_KEY_MIN_LENGTH} characters or remove it to get an ephemeral key`
      })
    }
  }
  return problems
}

/** `enable_webui` follows `enable_api` when not written. */
export const webUiEnabled = (config: GlobalConfig): boolean =>
  config.web !== undefined && (config.web.enable_webui ?? config.web.enable_api)

/** A decoded server file together with where it came from. */
export interface ServerDefinition {
  readonly id: string
  readonly file: string
  readonly config: ServerConfig
}

/** The id of a server: `name` when set, else `id`, else the file name without `.toml`. */
export const serverIdOf = (fileName: string, config: ServerConfig): string =>
  config.name ?? config.id ?? fileName.replace(/\.toml$/i, "")

export const decodeServerText = (
  file: string,
  fileName: string,
  text: string
): Either.Either<ServerDefinition, Array<ConfigProblem>> =>
  Either.flatMap(parseTomlText(file, text), (raw) =>
    Either.map(decodeWith(ServerConfig, file, raw), (config) => ({ id: serverIdOf(fileName, config), file, config }))
  )

/**
 * Conflicts between server files: the same id twice, or the same exact domain or wildcard in two servers.
 * Returns the problems and the servers that are in conflict with one listed before them.
 */
export const findServerConflicts = (
  servers: ReadonlyArray<ServerDefinition>
): { readonly problems: Array<ConfigProblem>; readonly rejected: ReadonlySet<ServerDefinition> } => {
  const problems: Array<ConfigProblem> = []
  const rejected = new Set<ServerDefinition>()
  const ids = new Map<string, ServerDefinition>()
  const domains = new Map<string, ServerDefinition>()
  for (const server of servers) {
    const owner = ids.get(server.id)
    if (owner !== undefined) {
      problems.push({
        file: server.file,
        path: server.config.name !== undefined ? "name" : server.config.id !== undefined ? "id" : "",
        message: `server id "${server.id}" is already used by ${owner.file}`
      })
      rejected.add(server)
      continue
    }
    const clash = server.config.domains.find((domain) => domains.has(domain))
    if (clash !== undefined) {
      problems.push({
        file: server.file,
        path: "domains",
        message: `domain "${clash}" is already routed to server "${domains.get(clash)!.id}" (${domains.get(clash)!.file})`
      })
      rejected.add(server)
      continue
    }
    ids.set(server.id, server)
    for (const domain of server.config.domains) domains.set(domain, server)
  }
  return { problems, rejected }
}
