/**
 * From file text to checked configuration: TOML parsing, strict schema decoding and the rules that span
 * several keys or files. Pure: reading files, favicons and secrets is ConfigStore's job.
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { parse as parseToml, TomlError } from "smol-toml"
import { GlobalConfig, WEB_KEY_MIN_LENGTH, WEB_KEY_PLACEHOLDER } from "./GlobalConfig.js"
import { isLoopbackHost } from "./HostPort.js"
import { type ConfigProblem, problemsFromParseError } from "./problems.js"
import { Domain, ServerConfig } from "./ServerConfig.js"

const STRICT = { onExcessProperty: "error", errors: "all" } as const

/** A TOML syntax error: the problem, and the line it was found on. */
interface SyntaxProblem {
  readonly problems: Array<ConfigProblem>
  readonly line: number | undefined
}

const parseTomlOrLine = (file: string, text: string): Either.Either<Record<string, unknown>, SyntaxProblem> => {
  try {
    return Either.right(parseToml(text))
  } catch (error) {
    if (error instanceof TomlError) {
      const reason = error.message.split("\n")[0]!.replace(/^Invalid TOML document: /, "")
      return Either.left({
        problems: [{ file: `${file}:${error.line}:${error.column}`, path: "", message: `TOML syntax error: ${reason}` }],
        line: error.line
      })
    }
    return Either.left({ problems: [{ file, path: "", message: `cannot parse: ${String(error)}` }], line: undefined })
  }
}

/** Parses TOML text; a syntax error names the file, line and column. */
export const parseTomlText = (file: string, text: string): Either.Either<Record<string, unknown>, Array<ConfigProblem>> =>
  Either.mapLeft(parseTomlOrLine(file, text), (syntax) => syntax.problems)

/**
 * What checking one file found: every problem, the whole configuration when there is none, and the top-level keys
 * that decoded on their own (with their defaults) so that the rules which need only those keys still run.
 */
export interface FileCheck<A> {
  readonly problems: ReadonlyArray<ConfigProblem>
  /** The whole configuration; undefined when the file has a problem. */
  readonly config: A | undefined
  /** The top-level keys without a problem, decoded; undefined when the file could not be parsed at all. */
  readonly partial: Partial<A> | undefined
}

const LENIENT = { onExcessProperty: "ignore", errors: "all" } as const

/** The keys of a struct's fields that no problem names. */
const soundKeys = <F extends object>(fields: F, broken: ReadonlySet<PropertyKey | undefined>): Array<keyof F> =>
  Object.keys(fields).filter((key): key is Extract<keyof F, string> => key in fields && !broken.has(key))

const soundGlobalKeys = (raw: unknown, broken: ReadonlySet<PropertyKey | undefined>): Partial<GlobalConfig> =>
  Either.getOrElse(
    Schema.decodeUnknownEither(GlobalConfig.pick(...soundKeys(GlobalConfig.fields, broken)), LENIENT)(raw),
    () => ({})
  )

const soundServerKeys = (raw: unknown, broken: ReadonlySet<PropertyKey | undefined>): Partial<ServerConfig> =>
  Either.getOrElse(
    Schema.decodeUnknownEither(ServerConfig.pick(...soundKeys(ServerConfig.fields, broken)), LENIENT)(raw),
    () => ({})
  )

const isTable = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The broken tables of a file whose problems are all inside sub-tables, each decoded on its own without those
 * sub-tables (`web` without `rate_limit`, `motd` without `offline`): the rules that need the rest of the table (the
 * `[web]` rules, favicons, the forwarding secret) still run. A broken option of the table itself (`web.bind`) leaves
 * the table out, as a rule could then read its default in place of what was meant.
 */
const soundTables = (
  decodeKey: (key: string, table: Record<string, unknown>) => Either.Either<unknown, unknown>,
  raw: Record<string, unknown>,
  paths: ReadonlyArray<ReadonlyArray<PropertyKey>>
): Record<string, unknown> => {
  const pruned = new Map<string, Record<string, unknown>>()
  const unusable = new Set<PropertyKey | undefined>()
  for (const [key, entry] of paths) {
    const table = typeof key === "string" ? raw[key] : undefined
    if (typeof key !== "string" || !isTable(table) || entry === undefined || !isTable(table[String(entry)])) {
      unusable.add(key)
      continue
    }
    const rest = pruned.get(key) ?? { ...table }
    delete rest[String(entry)]
    pruned.set(key, rest)
  }
  const out: Record<string, unknown> = {}
  for (const [key, table] of pruned) {
    if (unusable.has(key)) continue
    const decoded = decodeKey(key, table)
    if (Either.isRight(decoded)) out[key] = decoded.right
  }
  return out
}

/** Decodes one top-level table of `struct` on its own. */
const tableOf = (struct: typeof GlobalConfig | typeof ServerConfig) => (key: string, table: Record<string, unknown>) =>
  key in struct.fields
    ? Either.map(
      Schema.decodeUnknownEither(Schema.Struct(struct.fields).pick(key as never), LENIENT)({ [key]: table }),
      (decoded) => (decoded as Record<string, unknown>)[key]
    )
    : Either.left(undefined)

const soundGlobalTables = (raw: Record<string, unknown>, paths: ReadonlyArray<ReadonlyArray<PropertyKey>>) =>
  soundTables(tableOf(GlobalConfig), raw, paths) as Partial<GlobalConfig>

const soundServerTables = (raw: Record<string, unknown>, paths: ReadonlyArray<ReadonlyArray<PropertyKey>>) =>
  soundTables(tableOf(ServerConfig), raw, paths) as Partial<ServerConfig>

/**
 * Decodes `raw` strictly with every error; when that fails, decodes again only the top-level keys that no problem
 * names, and the broken tables without their broken entries, so that a problem in one key does not hide what the
 * others say.
 */
const decodeFile = <A, I>(
  schema: Schema.Schema<A, I, never>,
  decodeSound: (raw: unknown, broken: ReadonlySet<PropertyKey | undefined>) => Partial<A>,
  decodeTables: (raw: Record<string, unknown>, paths: ReadonlyArray<ReadonlyArray<PropertyKey>>) => Partial<A>,
  file: string,
  raw: Record<string, unknown>
): FileCheck<A> => {
  const full = Schema.decodeUnknownEither(schema, STRICT)(raw)
  if (Either.isRight(full)) return { problems: [], config: full.right, partial: full.right }
  const problems = problemsFromParseError(file, full.left)
  const paths = ParseResult.ArrayFormatter.formatErrorSync(full.left).map((issue) => issue.path)
  const broken = new Set(paths.map((path) => path[0]))
  if (broken.has(undefined)) return { problems, config: undefined, partial: {} }
  return { problems, config: undefined, partial: { ...decodeSound(raw, broken), ...decodeTables(raw, paths) } }
}

/** Where the server files are, as far as `proxy.toml` tells. */
export type ServersDirLookup =
  /** `servers_dir` as written, or its default when the file does not set it. */
  | { readonly _tag: "Known"; readonly value: string }
  /** The file cannot be read in full, but nowhere sets `servers_dir`: the default applies. */
  | { readonly _tag: "Default"; readonly value: string; readonly why: string }
  /** `servers_dir` itself is broken or hidden: the server files cannot be located. */
  | { readonly _tag: "Unknown"; readonly why: string }

const DEFAULT_SERVERS_DIR = "./servers"
const SETS_SERVERS_DIR = /^\s*["']?servers_dir["']?\s*=/m

/**
 * `servers_dir` of a `proxy.toml` with a syntax error: the lines before the error still parse in most cases, and
 * `servers_dir` is a top-level key, so it is written before any table when it is written at all.
 */
const serversDirDespiteSyntaxError = (text: string, line: number | undefined): ServersDirLookup => {
  const lines = text.split("\n")
  const before = line === undefined ? "" : lines.slice(0, line - 1).join("\n")
  const after = line === undefined ? text : lines.slice(line - 1).join("\n")
  const prefix = Either.getOrUndefined(parseTomlOrLine("", before))
  if (prefix !== undefined && "servers_dir" in prefix) {
    const servers_dir = prefix["servers_dir"]
    const decoded = Schema.decodeUnknownEither(GlobalConfig.pick("servers_dir"), STRICT)({ servers_dir })
    return Either.isRight(decoded)
      ? { _tag: "Known", value: decoded.right.servers_dir }
      : { _tag: "Unknown", why: "servers_dir is not a valid path" }
  }
  if (prefix !== undefined && !SETS_SERVERS_DIR.test(after)) {
    return { _tag: "Default", value: DEFAULT_SERVERS_DIR, why: "has a syntax error and does not set servers_dir" }
  }
  return { _tag: "Unknown", why: "servers_dir cannot be read past the syntax error" }
}

/** What checking `proxy.toml` found, with where the server files are. */
export interface GlobalCheck extends FileCheck<GlobalConfig> {
  readonly serversDir: ServersDirLookup
}

/** Checks `proxy.toml`: strict decoding, then the rules that span several of its keys, all problems together. */
export const checkGlobalText = (file: string, text: string): GlobalCheck => {
  const parsed = parseTomlOrLine(file, text)
  if (Either.isLeft(parsed)) {
    const { problems, line } = parsed.left
    return { problems, config: undefined, partial: undefined, serversDir: serversDirDespiteSyntaxError(text, line) }
  }
  const decoded = decodeFile(GlobalConfig, soundGlobalKeys, soundGlobalTables, file, parsed.right)
  const partial = decoded.partial ?? {}
  const problems = [...decoded.problems, ...checkGlobalRules(file, partial)]
  const serversDir: ServersDirLookup =
    partial.servers_dir !== undefined
      ? { _tag: "Known", value: partial.servers_dir }
      : { _tag: "Unknown", why: "servers_dir has a problem" }
  return problems.length > 0 ? { problems, config: undefined, partial, serversDir } : { ...decoded, serversDir }
}

/** Decodes `proxy.toml` and checks the rules that span several of its keys. */
export const decodeGlobalText = (file: string, text: string): Either.Either<GlobalConfig, Array<ConfigProblem>> => {
  const checked = checkGlobalText(file, text)
  return checked.config !== undefined ? Either.right(checked.config) : Either.left([...checked.problems])
}

/** The `[web]` rules of the specification's Authentication section. */
export const checkGlobalRules = (file: string, config: Pick<Partial<GlobalConfig>, "web">): Array<ConfigProblem> => {
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

/** Where a server was defined: a server file, or the labels of a container. */
export type ServerOrigin =
  | { readonly _tag: "File"; readonly path: string }
  | { readonly _tag: "Container"; readonly name: string; readonly id: string }

/** A decoded server together with where it came from. */
export interface ServerDefinition {
  readonly id: string
  /** Where it was defined, as messages name it: the file's path, or `container <name> (<short id>)`. */
  readonly file: string
  readonly source: ServerOrigin
  readonly config: ServerConfig
  /**
   * Where the server's counts and its addresses' balancer state live in the state shared by every thread: the
   * server's slot, and one per address in configuration order (-1: none). Set by the main thread when it publishes a
   * configuration (SharedMemory); absent, the server's state is this thread's own.
   */
  readonly slots?: ServerSlots
}

/** A server's places in the shared state (see ServerDefinition.slots). */
export interface ServerSlots {
  readonly server: number
  readonly addresses: ReadonlyArray<number>
}

/**
 * What the rules across server files need of one: its id (undefined when the keys that make it are broken) and its
 * domains. A definition is one; a file with problems gives one from the keys that still decode.
 */
export interface ServerIdentity {
  readonly id: string | undefined
  readonly file: string
  readonly config: {
    readonly id?: string | undefined
    readonly name?: string | undefined
    readonly domains: ReadonlyArray<string>
  }
}

/** The id of a server: `name` when set, else `id`, else the file name without `.toml`. */
export const serverIdOf = (fileName: string, config: Pick<Partial<ServerConfig>, "id" | "name">): string =>
  config.name ?? config.id ?? fileName.replace(/\.toml$/i, "")

/** What checking a server file found, and what is known of the server for the rules across files. */
export interface ServerCheck extends FileCheck<ServerConfig> {
  readonly definition: ServerDefinition | undefined
  readonly identity: ServerIdentity | undefined
}

const decodeDomain = Schema.decodeUnknownEither(Domain)

/** The domains of a file whose `domains` key has a problem: those that decode on their own. */
const soundDomains = (raw: unknown): Array<string> =>
  Array.isArray(raw)
    ? raw.flatMap((item) => Either.match(decodeDomain(item), { onLeft: () => [], onRight: (domain) => [domain] }))
    : []

/** Checks one server file; every problem is reported, and what still decodes is kept for the cross-file rules. */
export const checkServerText = (file: string, fileName: string, text: string): ServerCheck => {
  const parsed = parseTomlText(file, text)
  if (Either.isLeft(parsed)) {
    return { problems: parsed.left, config: undefined, partial: undefined, definition: undefined, identity: undefined }
  }
  return checkServerValue(file, fileName, parsed.right, { _tag: "File", path: file })
}

/**
 * Checks a server given as the value a TOML file parses to (a server file, or container labels made into that
 * shape). `fallbackId` is the id when neither `name` nor `id` is set (a file's name without `.toml`).
 */
export const checkServerValue = (
  file: string,
  fallbackId: string,
  raw: Record<string, unknown>,
  source: ServerOrigin
): ServerCheck => {
  const decoded = decodeFile(ServerConfig, soundServerKeys, soundServerTables, file, raw)
  if (decoded.config !== undefined) {
    const definition: ServerDefinition = { id: serverIdOf(fallbackId, decoded.config), file, source, config: decoded.config }
    return { ...decoded, definition, identity: definition }
  }
  const partial = decoded.partial ?? {}
  const idKnown = ["id", "name"].every((key) => !(key in raw) || key in partial)
  const config = {
    ...(partial.id !== undefined ? { id: partial.id } : {}),
    ...(partial.name !== undefined ? { name: partial.name } : {}),
    domains: partial.domains ?? soundDomains(raw["domains"])
  }
  const identity: ServerIdentity = { id: idKnown ? serverIdOf(fallbackId, partial) : undefined, file, config }
  return { ...decoded, definition: undefined, identity }
}

export const decodeServerText = (
  file: string,
  fileName: string,
  text: string
): Either.Either<ServerDefinition, Array<ConfigProblem>> => {
  const checked = checkServerText(file, fileName, text)
  return checked.definition !== undefined ? Either.right(checked.definition) : Either.left([...checked.problems])
}

/**
 * Conflicts between server files: the same id twice, or the same exact domain or wildcard in two servers.
 * Returns the problems and the servers that are in conflict with one listed before them.
 */
export const findServerConflicts = <S extends ServerIdentity>(
  servers: ReadonlyArray<S>
): { readonly problems: Array<ConfigProblem>; readonly rejected: ReadonlySet<S> } => {
  const problems: Array<ConfigProblem> = []
  const rejected = new Set<S>()
  const ids = new Map<string, S>()
  const domains = new Map<string, S>()
  for (const server of servers) {
    // Every clash of the server is reported at once: its id, and each of its domains already routed.
    const owner = server.id === undefined ? undefined : ids.get(server.id)
    if (owner !== undefined) {
      problems.push({
        file: server.file,
        path: server.config.name !== undefined ? "name" : server.config.id !== undefined ? "id" : "",
        message: `server id "${server.id}" is already used by ${owner.file}`
      })
      rejected.add(server)
    }
    for (const clash of new Set(server.config.domains)) {
      const other = domains.get(clash)
      if (other === undefined) continue
      problems.push({
        file: server.file,
        path: "domains",
        message: `domain "${clash}" is already routed to ${other.id !== undefined ? `server "${other.id}"` : "another server"} (${other.file})`
      })
      rejected.add(server)
    }
    if (rejected.has(server)) continue
    if (server.id !== undefined) ids.set(server.id, server)
    for (const domain of server.config.domains) domains.set(domain, server)
  }
  return { problems, rejected }
}
