/**
 * Reading configuration from disk: the global file, the server files, favicons and the forwarding secret.
 * Paths written in a file resolve against that file's directory.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { randomBytes } from "node:crypto"
import * as NodePath from "node:path"
import { decodeGlobalText, decodeServerText, type ServerDefinition } from "../../schema/decode.js"
import { checkFaviconPng, classifyFavicon, faviconDataUri } from "../../schema/favicon.js"
import type { GlobalConfig } from "../../schema/GlobalConfig.js"
import type { MotdEntry, MotdTable } from "../../schema/common.js"
import type { ConfigProblem } from "../../schema/problems.js"
import type { ServerConfig } from "../../schema/ServerConfig.js"
import { ConfigError } from "./ConfigError.js"

export const FAVICON_FETCH_TIMEOUT = Duration.seconds(5)

/** How a path is shown in messages: relative to the working directory when below it. */
export const displayPath = (absolute: string): string => {
  const relative = NodePath.relative(process.cwd(), absolute)
  return relative.length > 0 && !relative.startsWith("..") && !NodePath.isAbsolute(relative) ? relative : absolute
}

const resolveFrom = (baseDir: string, target: string): string => NodePath.resolve(baseDir, target)

const fail = (problems: ReadonlyArray<ConfigProblem>) => Effect.fail(new ConfigError({ problems }))

const readText = (file: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file)).pipe(
    Effect.mapError(
      (error) =>
        new ConfigError({
          problems: [{ file: displayPath(file), path: "", message: `cannot read: ${error.message}` }]
        })
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
        const bytes = yield* Effect.either(fs.readFile(target))
        if (Either.isLeft(bytes)) return yield* problem(`cannot read favicon file ${displayPath(target)}: ${bytes.left.message}`)
        png = Buffer.from(bytes.right)
        break
      }
      case "Url": {
        const client = yield* HttpClient.HttpClient
        const fetched = yield* client.get(source.url).pipe(
          Effect.flatMap((response) =>
            response.status >= 200 && response.status < 300
              ? response.arrayBuffer
              : Effect.fail(new Error(`HTTP ${response.status}`))
          ),
          Effect.timeoutFail({
            duration: FAVICON_FETCH_TIMEOUT,
            onTimeout: () => new Error(`no answer within ${Duration.format(FAVICON_FETCH_TIMEOUT)}`)
          }),
          Effect.scoped,
          Effect.either
        )
        if (Either.isLeft(fetched)) return yield* problem(`cannot fetch favicon ${source.url}: ${fetched.left.message}`)
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

/** Reads and checks `proxy.toml`; paths in it become absolute and favicons become data URIs. */
export const loadGlobalFile = (configFile: string) =>
  Effect.gen(function* () {
    const absolute = NodePath.resolve(configFile)
    const file = displayPath(absolute)
    const text = yield* readText(absolute)
    const decoded = decodeGlobalText(file, text)
    if (Either.isLeft(decoded)) return yield* fail(decoded.left)
    const config = decoded.right
    const baseDir = NodePath.dirname(absolute)
    const plugins = Object.fromEntries(
      Object.entries(config.plugins).map(([id, plugin]) => [
        id,
        plugin.path === undefined ? plugin : { ...plugin, path: resolveFrom(baseDir, plugin.path) }
      ])
    )
    const resolved: GlobalConfig = {
      ...config,
      servers_dir: resolveFrom(baseDir, config.servers_dir),
      plugins_dir: resolveFrom(baseDir, config.plugins_dir),
      ban: { ...config.ban, file: resolveFrom(baseDir, config.ban.file) },
      forwarding: { ...config.forwarding, secret_file: resolveFrom(baseDir, config.forwarding.secret_file) },
      plugins,
      default_motd: yield* resolveMotdFavicons(config.default_motd, baseDir, file, "default_motd")
    }
    return resolved
  })

/** Reads and checks one server file. */
export const loadServerFile = (absolute: string) =>
  Effect.gen(function* () {
    const text = yield* readText(absolute)
    return yield* resolveServerText(absolute, text)
  })

/** Checks the text of one server file (already read) and resolves its paths and favicons. */
export const resolveServerText = (absolute: string, text: string) =>
  Effect.gen(function* () {
    const file = displayPath(absolute)
    const decoded = decodeServerText(file, NodePath.basename(absolute), text)
    if (Either.isLeft(decoded)) return yield* fail(decoded.left)
    const baseDir = NodePath.dirname(absolute)
    const config = decoded.right.config
    const manager = config.server_manager
    const resolved: ServerConfig = {
      ...config,
      motd: yield* resolveMotdFavicons(config.motd, baseDir, file, "motd"),
      ...(manager?.type === "local" ? { server_manager: { ...manager, working_dir: resolveFrom(baseDir, manager.working_dir) } } : {})
    }
    const definition: ServerDefinition = { ...decoded.right, config: resolved }
    return definition
  })

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
export const needsForwardingSecret = (global: GlobalConfig, servers: Iterable<ServerDefinition>): boolean => {
  const secretModes = new Set(["modern", "legacy_guard"])
  if (secretModes.has(global.forwarding.mode)) return true
  for (const server of servers) {
    if (secretModes.has(server.config.forwarding_mode ?? global.forwarding.mode)) return true
  }
  return false
}

/**
 * Makes sure the forwarding secret file exists: created with 32 random bytes (base64url) and mode 0600 when absent.
 * With `create = false` (for `--check`) a missing file is fine and nothing is written.
 */
export const ensureForwardingSecret = (secretFile: string, create: boolean) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const file = displayPath(secretFile)
    const problem = (message: string) => new ConfigError({ problems: [{ file, path: "", message }] })
    const exists = yield* fs.exists(secretFile).pipe(Effect.mapError((error) => problem(error.message)))
    if (!exists) {
      if (!create) return "missing" as const
      const secret = randomBytes(32).toString("base64url")
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
