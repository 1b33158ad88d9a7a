/**
 * Reading configuration from disk: the global file, the server files, favicons and the forwarding secret.
 * Paths written in a file resolve against that file's directory.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import { randomBytes } from "node:crypto"
import * as NodePath from "node:path"
import {
  checkGlobalText,
  checkServerText as checkServerFileText,
  type ServerCheck,
  type ServerDefinition,
  type ServerIdentity
} from "../../schema/decode.js"
import { checkFaviconPng, classifyFavicon, FAVICON_MAX_BYTES, faviconDataUri, faviconSizeProblem } from "../../schema/favicon.js"
import type { GlobalConfig } from "../../schema/GlobalConfig.js"
import type { MotdEntry, MotdTable } from "../../schema/common.js"
import type { ConfigProblem } from "../../schema/problems.js"
import type { ServerConfig } from "../../schema/ServerConfig.js"
import { describeTransport } from "../net/transportError.js"
import { ConfigError } from "./ConfigError.js"

export const FAVICON_FETCH_TIMEOUT = Duration.seconds(5)

/** How a path is shown in messages: relative to the working directory when below it. */
export const displayPath = (absolute: string): string => {
  const relative = NodePath.relative(process.cwd(), absolute)
  return relative.length > 0 && !relative.startsWith("..") && !NodePath.isAbsolute(relative) ? relative : absolute
}

/** A favicon URL that gave no image; becomes a configuration problem naming the key. */
class FaviconFetchError extends Data.TaggedError("FaviconFetchError")<{ readonly reason: string }> {}

const resolveFrom = (baseDir: string, target: string): string => NodePath.resolve(baseDir, target)

const fail = (problems: ReadonlyArray<ConfigProblem>) => Effect.fail(new ConfigError({ problems }))

/**
 * Why a file could not be read, in words: the platform's message carries its own names (`NotFound:
 * FileSystem.readFile (...)`) and the system's code.
 */
export const fileErrorText = (error: { readonly message: string; readonly cause?: unknown }): string => {
  const code = error.cause instanceof Error && "code" in error.cause ? error.cause.code : undefined
  switch (code) {
    case "ENOENT":
      return "no such file"
    case "EISDIR":
      return "it is a directory, not a file"
    case "EACCES":
    case "EPERM":
      return "permission denied"
    case "ENOTDIR":
      return "a part of the path is not a directory"
    default:
      return error.cause instanceof Error ? error.cause.message : error.message
  }
}

const readText = (file: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file)).pipe(
    Effect.mapError(
      (error) =>
        new ConfigError({
          problems: [{ file: displayPath(file), path: "", message: `cannot read: ${fileErrorText(error)}` }]
        })
    )
  )

/** An HTTP client error with the system's reason under it (`ECONNREFUSED`, no such host). */
const withRootCause = (error: { readonly message: string; readonly cause?: unknown }): string => {
  const detail = describeTransport(error)
  return detail === error.message ? detail : `${error.message} (${detail})`
}

/** A response body of at most `max` bytes: reading stops at the first byte past it, and that is a failure. */
const readAtMost = <E extends { readonly message: string }>(body: Stream.Stream<Uint8Array, E>, max: number) =>
  body.pipe(
    Stream.mapError((error) => new FaviconFetchError({ reason: error.message })),
    Stream.runFoldWhile(
      { chunks: [] as Array<Uint8Array>, size: 0 },
      (read) => read.size <= max,
      (read, chunk) => {
        read.chunks.push(chunk)
        return { chunks: read.chunks, size: read.size + chunk.length }
      }
    ),
    Effect.flatMap((read) =>
      read.size > max
        ? Effect.fail(new FaviconFetchError({ reason: `the answer is over ${max} bytes, more than a server-list answer has room for` }))
        : Effect.succeed(Buffer.concat(read.chunks))
    )
  )

/** Loads one favicon value and turns it into the data URI a status response carries. */
const loadFavicon = (value: string, baseDir: string, file: string, keyPath: string) =>
  Effect.gen(function* () {
    const source = classifyFavicon(value)
    const problem = (message: string) => fail([{ file, path: keyPath, message }])
    let png: Buffer
    switch (source._tag) {
      case "Inline":
        png = source.png
        break
      case "File": {
        const fs = yield* FileSystem.FileSystem
        const target = resolveFrom(baseDir, source.path)
        // Only a regular file of a favicon's size is read: opening a FIFO waits for a writer (holding one of the
        // few threads all file I/O shares), and a device such as /dev/zero never ends.
        const info = yield* Effect.either(fs.stat(target))
        if (Either.isLeft(info)) return yield* problem(`cannot read favicon file ${displayPath(target)}: ${fileErrorText(info.left)}`)
        if (info.right.type !== "File") return yield* problem(`favicon ${displayPath(target)} is not a regular file`)
        const tooLarge = faviconSizeProblem(info.right.size)
        if (tooLarge !== undefined) return yield* problem(`favicon ${displayPath(target)} ${tooLarge}`)
        const bytes = yield* Effect.either(fs.readFile(target))
        if (Either.isLeft(bytes)) return yield* problem(`cannot read favicon file ${displayPath(target)}: ${fileErrorText(bytes.left)}`)
        png = Buffer.from(bytes.right)
        break
      }
      case "Url": {
        const client = yield* HttpClient.HttpClient
        const fetched = yield* client.get(source.url).pipe(
          Effect.mapError((error) => new FaviconFetchError({ reason: withRootCause(error) })),
          Effect.flatMap((response) =>
            response.status >= 200 && response.status < 300
              ? readAtMost(response.stream, FAVICON_MAX_BYTES)
              : Effect.fail(new FaviconFetchError({ reason: `HTTP ${response.status}` }))
          ),
          Effect.timeoutFail({
            duration: FAVICON_FETCH_TIMEOUT,
            onTimeout: () => new FaviconFetchError({ reason: `no answer within ${Duration.format(FAVICON_FETCH_TIMEOUT)}` })
          }),
          Effect.scoped,
          Effect.either
        )
        if (Either.isLeft(fetched)) return yield* problem(`cannot fetch favicon ${source.url}: ${fetched.left.reason}`)
        png = Buffer.from(fetched.right)
        break
      }
    }
    const reason = checkFaviconPng(png)
    if (reason !== undefined) return yield* problem(`favicon ${reason}`)
    return faviconDataUri(png)
  })

/** Replaces every favicon of a MOTD table by its data URI; all problems are collected. */
const resolveMotdFavicons = (motd: MotdTable, baseDir: string, file: string, tableName: string) =>
  Effect.gen(function* () {
    const out: Record<string, MotdEntry> = {}
    const problems: Array<ConfigProblem> = []
    for (const [state, entry] of Object.entries(motd) as Array<[string, MotdEntry | undefined]>) {
      if (entry === undefined) continue
      if (entry.favicon === undefined) {
        out[state] = entry
        continue
      }
      const uri = yield* Effect.either(loadFavicon(entry.favicon, baseDir, file, `${tableName}.${state}.favicon`))
      if (Either.isLeft(uri)) problems.push(...uri.left.problems)
      else out[state] = { ...entry, favicon: uri.right }
    }
    if (problems.length > 0) return yield* fail(problems)
    return out as MotdTable
  })

/** Paths written in `proxy.toml` become absolute, against the file's directory; keys that are absent stay absent. */
const resolveGlobalPaths = (config: Partial<GlobalConfig>, baseDir: string): Partial<GlobalConfig> => ({
  ...config,
  ...(config.servers_dir !== undefined ? { servers_dir: resolveFrom(baseDir, config.servers_dir) } : {}),
  ...(config.plugins_dir !== undefined ? { plugins_dir: resolveFrom(baseDir, config.plugins_dir) } : {}),
  ...(config.ban !== undefined ? { ban: { ...config.ban, file: resolveFrom(baseDir, config.ban.file) } } : {}),
  ...(config.forwarding !== undefined
    ? { forwarding: { ...config.forwarding, secret_file: resolveFrom(baseDir, config.forwarding.secret_file) } }
    : {}),
  ...(config.plugins !== undefined
    ? {
        plugins: Object.fromEntries(
          Object.entries(config.plugins).map(([id, plugin]) => [
            id,
            plugin.path === undefined ? plugin : { ...plugin, path: resolveFrom(baseDir, plugin.path) }
          ])
        )
      }
    : {})
})

/** Where the server files were looked for, or why they were not. */
export type ServersLocation =
  | { readonly _tag: "Found"; readonly dir: string; readonly note?: string }
  | { readonly _tag: "NotChecked"; readonly note: string }

/** What checking `proxy.toml` found: every problem, and what is known despite them. */
export interface GlobalFileCheck {
  readonly file: string
  readonly problems: ReadonlyArray<ConfigProblem>
  /** The whole configuration with absolute paths and favicons as data URIs; undefined when there is a problem. */
  readonly config: GlobalConfig | undefined
  /** The keys that decoded, with absolute paths: enough for the rules that need only those keys. */
  readonly partial: Partial<GlobalConfig>
  readonly servers: ServersLocation
}

/** Reads and checks `proxy.toml`, reporting every problem; paths become absolute and favicons data URIs. */
export const checkGlobalFile = (configFile: string) =>
  Effect.gen(function* () {
    const absolute = NodePath.resolve(configFile)
    const text = yield* Effect.either(readText(absolute))
    if (Either.isLeft(text)) {
      const file = displayPath(absolute)
      const unread: GlobalFileCheck = {
        file,
        problems: text.left.problems,
        config: undefined,
        partial: {},
        servers: { _tag: "NotChecked", note: `the server files were not checked: ${file} cannot be read` }
      }
      return unread
    }
    return yield* checkGlobalFileText(absolute, text.right)
  })

/**
 * Checks the text of `proxy.toml` (already read, or about to be written) as the file at `configFile`: every problem,
 * with paths made absolute and favicons turned into data URIs.
 */
export const checkGlobalFileText = (configFile: string, text: string) =>
  Effect.gen(function* () {
    const absolute = NodePath.resolve(configFile)
    const file = displayPath(absolute)
    const baseDir = NodePath.dirname(absolute)
    const checked = checkGlobalText(file, text)
    const problems = [...checked.problems]
    let partial = resolveGlobalPaths(checked.partial ?? {}, baseDir)
    if (partial.default_motd !== undefined) {
      const motd = yield* Effect.either(resolveMotdFavicons(partial.default_motd, baseDir, file, "default_motd"))
      if (Either.isLeft(motd)) problems.push(...motd.left.problems)
      else partial = { ...partial, default_motd: motd.right }
    }
    const lookup = checked.serversDir
    const servers: ServersLocation =
      lookup._tag === "Known"
        ? { _tag: "Found", dir: resolveFrom(baseDir, lookup.value) }
        : lookup._tag === "Default"
          ? {
              _tag: "Found",
              dir: resolveFrom(baseDir, lookup.value),
              note:
                `${file} ${lookup.why}; the server files were checked in the default servers_dir ` +
                displayPath(resolveFrom(baseDir, lookup.value))
            }
          : { _tag: "NotChecked", note: `the server files were not checked: ${lookup.why} in ${file}` }
    const config = checked.config !== undefined && problems.length === 0 ? { ...checked.config, ...partial } : undefined
    const result: GlobalFileCheck = { file, problems, config, partial, servers }
    return result
  })

/** Reads and checks `proxy.toml`; paths in it become absolute and favicons become data URIs. */
export const loadGlobalFile = (configFile: string) =>
  Effect.flatMap(checkGlobalFile(configFile), (checked) =>
    checked.config !== undefined ? Effect.succeed(checked.config) : fail(checked.problems)
  )

/** Reads and checks one server file. */
export const loadServerFile = (absolute: string) =>
  Effect.gen(function* () {
    const text = yield* readText(absolute)
    return yield* resolveServerText(absolute, text)
  })

/** What checking a server file found: every problem, the server when there is none, and what is known despite them. */
export interface ServerFileCheck {
  readonly problems: ReadonlyArray<ConfigProblem>
  /** The server with absolute paths and favicons as data URIs; undefined when the file has a problem. */
  readonly definition: ServerDefinition | undefined
  /** Id and domains as far as they decode, for the rules across files. */
  readonly identity: ServerIdentity | undefined
  /** The keys that decoded. */
  readonly partial: Partial<ServerConfig>
}

/** Checks the text of one server file (already read), reporting every problem, and resolves its paths and favicons. */
export const checkServerText = (absolute: string, text: string) => {
  const file = displayPath(absolute)
  return resolveServerCheck(checkServerFileText(file, NodePath.basename(absolute), text), file, NodePath.dirname(absolute))
}

/**
 * The second half of checking a server (from a file or from container labels): favicons become data URIs and
 * relative paths resolve against `baseDir`; their problems join those of decoding.
 */
export const resolveServerCheck = (checked: ServerCheck, file: string, baseDir: string) =>
  Effect.gen(function* () {
    const problems = [...checked.problems]
    const motd =
      checked.partial?.motd === undefined
        ? undefined
        : yield* Effect.either(resolveMotdFavicons(checked.partial.motd, baseDir, file, "motd"))
    if (motd !== undefined && Either.isLeft(motd)) problems.push(...motd.left.problems)
    const partial = checked.partial ?? {}
    const definition = checked.definition
    if (definition === undefined || problems.length > 0 || motd === undefined || Either.isLeft(motd)) {
      const broken: ServerFileCheck = { problems, definition: undefined, identity: checked.identity, partial }
      return broken
    }
    const manager = definition.config.server_manager
    const config: ServerConfig = {
      ...definition.config,
      motd: motd.right,
      ...(manager?.type === "local" ? { server_manager: { ...manager, working_dir: resolveFrom(baseDir, manager.working_dir) } } : {})
    }
    const resolved: ServerDefinition = { ...definition, config }
    const sound: ServerFileCheck = { problems, definition: resolved, identity: resolved, partial: config }
    return sound
  })

/** Checks the text of one server file (already read) and resolves its paths and favicons. */
export const resolveServerText = (absolute: string, text: string) =>
  Effect.flatMap(checkServerText(absolute, text), (checked) =>
    checked.definition !== undefined ? Effect.succeed(checked.definition) : fail(checked.problems)
  )

/** The `*.toml` files of `servers_dir`, sorted by name so that conflicts are reported the same way every time. */
export const listServerFiles = (serversDir: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const entries = yield* fs.readDirectory(serversDir).pipe(
      Effect.mapError(
        (error) =>
          new ConfigError({
            problems: [
              {
                file: displayPath(serversDir),
                path: "",
                message:
                  error._tag === "SystemError" && error.reason === "NotFound"
                    ? "servers_dir does not exist; create it or point servers_dir elsewhere"
                    : `cannot list servers_dir: ${error.message}`
              }
            ]
          })
      )
    )
    return entries
      .filter((name) => name.toLowerCase().endsWith(".toml") && !name.startsWith("."))
      .sort()
      .map((name) => NodePath.join(serversDir, name))
  })

/** Whether any server (or the global default) forwards with a scheme that needs the shared secret. */
export const needsForwardingSecret = (
  global: Pick<GlobalConfig, "forwarding">,
  servers: Iterable<{ readonly config: Pick<Partial<ServerConfig>, "forwarding_mode"> }>
): boolean => {
  const secretModes = new Set(["modern", "legacy_guard"])
  if (secretModes.has(global.forwarding.mode)) return true
  for (const server of servers) {
    if (secretModes.has(server.config.forwarding_mode ?? global.forwarding.mode)) return true
  }
  return false
}

/**
 * Makes sure the forwarding secret file exists: created with 32 random bytes (base64url) and mode 0600 when absent,
 * with its missing folders (mode 0700). With `create = false` (for `--check`) a missing file is fine as long as it
 * could be created, and nothing is written.
 */
export const ensureForwardingSecret = (secretFile: string, create: boolean) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const file = displayPath(secretFile)
    const problem = (message: string) => new ConfigError({ problems: [{ file, path: "", message }] })
    // Unreadable counts as missing here (a path through a file, say): the folder check below says what is wrong.
    const exists = yield* fs.exists(secretFile).pipe(Effect.orElseSucceed(() => false))
    if (!exists) {
      // The nearest folder that exists must be one Portal can write in: it makes the missing folders, then the file.
      let folder = NodePath.dirname(secretFile)
      while (!(yield* fs.exists(folder).pipe(Effect.orElseSucceed(() => false))) && NodePath.dirname(folder) !== folder) {
        folder = NodePath.dirname(folder)
      }
      const writable = yield* fs.stat(folder).pipe(
        Effect.flatMap((info) =>
          info.type === "Directory"
            ? Effect.as(fs.access(folder, { writable: true }), undefined)
            : Effect.succeed(`${displayPath(folder)} is not a folder`)
        ),
        Effect.catchAll(() => Effect.succeed(`${displayPath(folder)} is not writable`))
      )
      if (writable !== undefined) return yield* Effect.fail(problem(`cannot create the forwarding secret: ${writable}`))
      if (!create) return "missing" as const
      const secret = randomBytes(32).toString("base64url")
      yield* fs
        .makeDirectory(NodePath.dirname(secretFile), { recursive: true, mode: 0o700 })
        .pipe(Effect.mapError((error) => problem(`cannot create the forwarding secret's folder: ${error.message}`)))
      yield* fs
        .writeFileString(secretFile, `${secret}\n`, { flag: "wx", mode: 0o600 })
        .pipe(Effect.mapError((error) => problem(`cannot create the forwarding secret: ${error.message}`)))
      yield* Effect.logInfo(`created forwarding secret ${file} (mode 0600); give the same secret to your backends`)
      return "created" as const
    }
    const text = yield* fs.readFileString(secretFile).pipe(Effect.mapError((error) => problem(`cannot read: ${error.message}`)))
    if (text.trim().length === 0) return yield* Effect.fail(problem("the forwarding secret file is empty"))
    return "present" as const
  })
