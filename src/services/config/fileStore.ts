/**
 * The file-backed ConfigStore: loads `proxy.toml` and every server file strictly, applies changes in `servers_dir`
 * while running (file watch plus a slow poll as a safety net), and re-reads `proxy.toml` on SIGHUP. A file that
 * fails to decode is reported and the last good version stays.
 * Servers that are not files (container discovery) come in through one seam, an optional `ServerSource` in the
 * context (config/ServerSource.ts): its servers are merged after the files' whenever either changes, files winning.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { randomBytes } from "node:crypto"
import { findServerConflicts, type ServerDefinition, type ServerIdentity } from "../../schema/decode.js"
import { GlobalConfig } from "../../schema/GlobalConfig.js"
import { isLoopbackHost } from "../../schema/HostPort.js"
import { ServerConfig } from "../../schema/ServerConfig.js"
import { type ConfigProblem, formatProblem } from "../../schema/problems.js"
import { ConfigError } from "./ConfigError.js"
import {
  checkGlobalFile,
  checkServerText,
  displayPath,
  ensureForwardingSecret,
  listServerFiles,
  loadGlobalFile,
  needsForwardingSecret,
  resolveServerText
} from "./load.js"
import { type ConfigSnapshot, ConfigStore, RESTART_ONLY_KEYS } from "../ConfigStore.js"
import { watchFiles } from "../files/watch.js"
import { mergeSourcedServers, ServerSource } from "./ServerSource.js"
import { configurationWarningLines } from "./features.js"


export interface ConfigStoreOptions {
  readonly configFile: string
  /** Watch `servers_dir` and listen for SIGHUP (off for one-shot checks). */
  readonly watch?: boolean
  /** Create the forwarding secret file when a mode needs it and it is absent. */
  readonly createSecrets?: boolean
  /** How often `servers_dir` is rescanned besides the file watch. */
  readonly pollInterval?: Duration.DurationInput
}

/** Editors save in several steps; a rescan waits for them to settle. */
const WATCH_DEBOUNCE = Duration.millis(150)

interface FileState {
  readonly text: string
  /** The version in use, if any. */
  readonly good: ServerDefinition | undefined
  /** A version that decoded but conflicts with another server, and the conflict last reported. */
  readonly heldBack?: ServerDefinition
  readonly conflict?: string
  /** The text has problems (reported): the next good text says the file is fixed. */
  readonly broken?: boolean
}

/** The result of reading every file once. */
export interface LoadedConfiguration {
  readonly snapshot: ConfigSnapshot
  readonly files: ReadonlyMap<string, FileState>
  readonly secret: "missing" | "created" | "present" | "unused"
}

/**
 * The file form of a configuration, for telling whether two differ (`5s` and `5000ms` are the same). Encoding a
 * decoded value does not fail; were it to, the value itself is compared rather than throwing inside an Effect.
 */
const comparable =
  <A, I>(schema: Schema.Schema<A, I>) =>
  (value: A): A | I =>
    Either.getOrElse(Schema.encodeEither(schema)(value), () => value)
const encodeGlobal = comparable(GlobalConfig)
const encodeServer = comparable(ServerConfig)

/**
 * Reads `proxy.toml`, every server file and the cross-file rules; every problem of every file is reported together.
 * A file with problems still takes part in the rules across files with what decodes of it (its id and domains), and
 * a broken `proxy.toml` still lets the server files be checked unless `servers_dir` itself is what is broken.
 * Used at startup and by `--check`.
 */
export const loadConfiguration = (configFile: string, options: { readonly createSecrets: boolean }) =>
  Effect.gen(function* () {
    const global = yield* checkGlobalFile(configFile)
    const fs = yield* FileSystem.FileSystem
    const problems: Array<ConfigProblem> = [...global.problems]
    const notes: Array<string> = []
    const files = new Map<string, FileState>()
    const definitions: Array<ServerDefinition> = []
    const identities: Array<ServerIdentity> = []
    /** Every server's forwarding mode as far as it decodes (a broken one counts as the global mode). */
    const forwardingModes: Array<{ readonly config: Partial<ServerConfig> }> = []
    const servers = global.servers
    if (servers.note !== undefined) notes.push(servers.note)
    const listed = servers._tag === "Found" ? yield* Effect.either(listServerFiles(servers.dir)) : Either.right([])
    if (Either.isLeft(listed)) problems.push(...listed.left.problems)
    for (const path of Either.getOrElse(listed, () => [])) {
      const text = yield* fs.readFileString(path).pipe(Effect.orElseSucceed(() => undefined))
      if (text === undefined) {
        problems.push({ file: displayPath(path), path: "", message: "cannot read the file" })
        continue
      }
      const checked = yield* checkServerText(path, text)
      problems.push(...checked.problems)
      if (checked.identity !== undefined) identities.push(checked.identity)
      forwardingModes.push({ config: checked.partial })
      files.set(path, { text, good: checked.definition })
      if (checked.definition !== undefined) definitions.push(checked.definition)
    }
    problems.push(...findServerConflicts(identities).problems)
    let secret: LoadedConfiguration["secret"] = "unused"
    const forwarding = global.partial.forwarding
    if (forwarding !== undefined && needsForwardingSecret({ forwarding }, forwardingModes)) {
      // A configuration that will not run creates nothing; an existing secret file is still checked.
      const create = options.createSecrets && problems.length === 0
      secret = yield* Effect.either(ensureForwardingSecret(forwarding.secret_file, create)).pipe(
        Effect.map(Either.getOrElse((error) => (problems.push(...error.problems), "unused" as const)))
      )
    }
    if (problems.length > 0 || global.config === undefined) {
      return yield* Effect.fail(new ConfigError({ problems, notes }))
    }
    const snapshot: ConfigSnapshot = {
      configFile,
      global: global.config,
      servers: new Map(definitions.map((server) => [server.id, server])),
      revision: 1
    }
    const loaded: LoadedConfiguration = { snapshot, files, secret }
    return loaded
  })

/** A loopback `[web]` without a key gets an ephemeral one for this run (the specification's rule). */
const withEphemeralWebKey = (global: GlobalConfig) =>
  Effect.gen(function* () {
    const web = global.web
    // Without the API nothing is served that a key would open.
    if (web === undefined || !web.enable_api || web.api_key !== undefined || !isLoopbackHost(web.bind.host)) return global
    const key = randomBytes(24).toString("base64url")
    const host = web.bind.host.includes(":") ? `[${web.bind.host}]` : web.bind.host
    // Port 0: the port the system gives is known once listening, and logged then.
    const where = web.bind.port === 0 ? "at the address logged once it listens" : `at http://${host}:${web.bind.port}/`
    yield* Effect.logWarning(
      `[web].api_key is not set: generated a key for this run only. Sign in to the web UI ${where} ` +
        `(or send "Authorization: Bearer <key>" to the API) with the key ${key} ; set [web].api_key to keep one across restarts`
    )
    return { ...global, web: { ...web, api_key: key } }
  })

const describeServerChanges = (before: ConfigSnapshot, after: ConfigSnapshot): string | undefined => {
  const parts: Array<string> = []
  for (const [id, server] of after.servers) {
    const old = before.servers.get(id)
    if (old === undefined) parts.push(`added ${id}`)
    else if (
      old.file !== server.file ||
      (old.config !== server.config && JSON.stringify(encodeServer(old.config)) !== JSON.stringify(encodeServer(server.config)))
    ) {
      parts.push(`changed ${id}`)
    }
  }
  for (const id of before.servers.keys()) if (!after.servers.has(id)) parts.push(`removed ${id}`)
  return parts.length > 0 ? parts.join(", ") : undefined
}

/** The configuration warnings the startup log gives, said again when a reload brings one that was not there before. */
const warnAnew = (before: ConfigSnapshot, after: ConfigSnapshot) =>
  Effect.suspend(() => {
    const known = new Set(configurationWarningLines(before.global, before.servers.values()))
    const fresh = configurationWarningLines(after.global, after.servers.values()).filter((line) => !known.has(line))
    return Effect.forEach(fresh, (line) => Effect.logWarning(line), { discard: true })
  })

const makeConfigStore = (options: ConfigStoreOptions) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const httpClient = yield* HttpClient.HttpClient
    const createSecrets = options.createSecrets ?? true
    const loaded = yield* loadConfiguration(options.configFile, { createSecrets })
    // The file as it was at startup: what the restart-only keys run with, whatever reloads came since.
    const startupFileGlobal = loaded.snapshot.global
    const initialGlobal = yield* withEphemeralWebKey(loaded.snapshot.global)
    const current = yield* SubscriptionRef.make<ConfigSnapshot>({ ...loaded.snapshot, global: initialGlobal })
    const files = new Map(loaded.files)
    const lock = yield* Effect.makeSemaphore(1)
    const provide = <A, E>(effect: Effect.Effect<A, E, FileSystem.FileSystem | HttpClient.HttpClient>) =>
      effect.pipe(Effect.provideService(FileSystem.FileSystem, fs), Effect.provideService(HttpClient.HttpClient, httpClient))

    const reportProblems = (problems: ReadonlyArray<ConfigProblem>, consequence: string) =>
      Effect.forEach(problems, (problem) => Effect.logError(`${formatProblem(problem)} (${consequence})`), { discard: true })

    const ensureSecret = (snapshot: ConfigSnapshot) =>
      needsForwardingSecret(snapshot.global, snapshot.servers.values())
        ? provide(ensureForwardingSecret(snapshot.global.forwarding.secret_file, createSecrets)).pipe(
            Effect.catchAll((error) => reportProblems(error.problems, "forwarding that needs the secret will fail"))
          )
        : Effect.void

    /** Publishes a new snapshot when something really changed. */
    const publish = (next: Omit<ConfigSnapshot, "revision">) =>
      Effect.gen(function* () {
        const before = yield* SubscriptionRef.get(current)
        const serverChanges = describeServerChanges(before, { ...next, revision: 0 })
        // The same object is the same configuration: a rescan of the server files passes the running one on, and
        // encoding it to compare on every poll was a fifth of what an idle Portal spent.
        const globalChanged =
          before.global !== next.global && JSON.stringify(encodeGlobal(before.global)) !== JSON.stringify(encodeGlobal(next.global))
        if (serverChanges === undefined && !globalChanged) return
        const snapshot: ConfigSnapshot = { ...next, revision: before.revision + 1 }
        yield* SubscriptionRef.set(current, snapshot)
        if (serverChanges !== undefined) yield* Effect.logInfo(`servers reloaded: ${serverChanges}`)
        yield* warnAnew(before, snapshot)
        yield* ensureSecret(snapshot)
      })

    // Servers from a ServerSource (container discovery) when one is provided: merged after the files' servers.
    let fileServers: ReadonlyArray<ServerDefinition> = [...loaded.snapshot.servers.values()]
    let sourced: ReadonlyArray<ServerDefinition> = []
    let reportedClashes = new Set<string>()
    const withSourced = () =>
      Effect.gen(function* () {
        const merged = mergeSourcedServers(fileServers, sourced)
        const clashes = new Set(merged.problems.map(formatProblem))
        for (const line of clashes) if (!reportedClashes.has(line)) yield* Effect.logError(`${line} (server not loaded)`)
        reportedClashes = clashes
        return new Map(merged.servers.map((server) => [server.id, server]))
      })
    const source = yield* Effect.serviceOption(ServerSource)
    if (Option.isSome(source)) {
      yield* source.value.servers.changes.pipe(
        Stream.runForEach((servers) =>
          lock.withPermits(1)(
            Effect.gen(function* () {
              sourced = servers
              const snapshot = yield* SubscriptionRef.get(current)
              yield* publish({ ...snapshot, servers: yield* withSourced() })
            })
          )
        ),
        Effect.forkScoped
      )
    }

    /** What the last rescan could not list servers_dir for, while it cannot. */
    let unlisted: string | undefined

    const rescanServers = lock.withPermits(1)(
      Effect.gen(function* () {
        const snapshot = yield* SubscriptionRef.get(current)
        const listed = yield* Effect.either(provide(listServerFiles(snapshot.global.servers_dir)))
        if (Either.isLeft(listed)) {
          // Said once, not at every poll, until the folder can be listed again (or fails another way).
          const said = listed.left.problems.map(formatProblem).join("\n")
          if (said !== unlisted) yield* reportProblems(listed.left.problems, "keeping the servers loaded before")
          unlisted = said
          return
        }
        if (unlisted !== undefined) yield* Effect.logInfo(`${displayPath(snapshot.global.servers_dir)} can be listed again`)
        unlisted = undefined
        const present = new Set(listed.right)
        for (const path of [...files.keys()]) if (!present.has(path)) files.delete(path)
        // Servers whose file did not change come first so that a new or edited file loses a conflict.
        const stable: Array<ServerDefinition> = []
        const edited: Array<{ readonly path: string; readonly text: string; readonly candidate: ServerDefinition; readonly fallback: ServerDefinition | undefined }> = []
        for (const path of listed.right) {
          const text = yield* fs.readFileString(path).pipe(Effect.orElseSucceed(() => undefined))
          if (text === undefined) continue // removed between listing and reading; the next scan settles it
          const previous = files.get(path)
          if (previous !== undefined && previous.text === text) {
            // A version held back by a conflict is tried again: the other server may be gone now.
            if (previous.heldBack !== undefined) edited.push({ path, text, candidate: previous.heldBack, fallback: previous.good })
            else if (previous.good !== undefined) stable.push(previous.good)
            continue
          }
          const decoded = yield* Effect.either(provide(resolveServerText(path, text)))
          if (Either.isLeft(decoded)) {
            yield* reportProblems(
              decoded.left.problems,
              previous?.good !== undefined ? "keeping the last good version of this server" : "server not loaded"
            )
            files.set(path, { text, good: previous?.good, broken: true })
            if (previous?.good !== undefined) stable.push(previous.good)
            continue
          }
          edited.push({ path, text, candidate: decoded.right, fallback: previous?.good })
        }
        const conflicts = findServerConflicts([...stable, ...edited.map((entry) => entry.candidate)])
        const servers = [...stable]
        for (const { path, text, candidate, fallback } of edited) {
          if (!conflicts.rejected.has(candidate)) {
            // Its problems were reported; that they are gone is said too (a fix back to the version in use changes
            // nothing else that would be logged).
            if (files.get(path)?.broken === true) yield* Effect.logInfo(`${displayPath(path)}: its problems are fixed; the server is loaded from it`)
            servers.push(candidate)
            files.set(path, { text, good: candidate })
            continue
          }
          const report = conflicts.problems.filter((problem) => problem.file === candidate.file).map(formatProblem).join("\n")
          if (files.get(path)?.conflict !== report) {
            yield* reportProblems(
              conflicts.problems.filter((problem) => problem.file === candidate.file),
              fallback !== undefined ? "keeping the last good version of this server" : "server not loaded"
            )
          }
          files.set(path, { text, good: fallback, heldBack: candidate, conflict: report })
          if (fallback !== undefined && !servers.some((server) => server.id === fallback.id)) servers.push(fallback)
        }
        const leftover = findServerConflicts(servers).rejected // a kept old version can clash with a new file
        if (leftover.size > 0) servers.splice(0, servers.length, ...servers.filter((server) => !leftover.has(server)))
        servers.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0))
        fileServers = servers
        yield* publish({ ...snapshot, servers: yield* withSourced() })
      })
    )

    const reloadGlobal = lock.withPermits(1)(
      Effect.gen(function* () {
        const snapshot = yield* SubscriptionRef.get(current)
        const next = yield* Effect.either(provide(loadGlobalFile(snapshot.configFile)))
        if (Either.isLeft(next)) {
          yield* reportProblems(next.left.problems, `keeping the running configuration of ${displayPath(snapshot.configFile)}`)
          return
        }
        // Compare file against file: the running snapshot may hold an ephemeral web key the file never had. Against
        // the startup file, so that a key set back to its running value is not reported, and one still pending is.
        const before = encodeGlobal(startupFileGlobal)
        const after = encodeGlobal(next.right)
        const applied: Record<string, unknown> = { ...next.right }
        for (const key of RESTART_ONLY_KEYS) {
          if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) {
            yield* Effect.logWarning(`${displayPath(snapshot.configFile)}: ${key} changed and needs a restart to take effect`)
          }
          if (snapshot.global[key] === undefined) delete applied[key]
          else applied[key] = snapshot.global[key]
        }
        yield* Effect.logInfo(`reloaded ${displayPath(snapshot.configFile)}`)
        yield* publish({ ...snapshot, global: applied as GlobalConfig })
      })
    ).pipe(Effect.zipRight(rescanServers))

    if (options.watch ?? true) {
      // Every poll rescans: reading a directory of small files is cheap, and the text comparison skips the rest.
      yield* watchFiles({
        dir: initialGlobal.servers_dir,
        subject: `changes in ${displayPath(initialGlobal.servers_dir)}`,
        debounce: WATCH_DEBOUNCE,
        pollInterval: options.pollInterval ?? Duration.seconds(5),
        onChange: rescanServers
      })
      const runtime = yield* Effect.runtime<never>()
      const onHangup = () => {
        Runtime.runFork(runtime)(
          Effect.logInfo("SIGHUP: re-reading the configuration").pipe(Effect.zipRight(reloadGlobal))
        )
      }
      yield* Effect.acquireRelease(
        Effect.sync(() => process.on("SIGHUP", onHangup)),
        () => Effect.sync(() => process.off("SIGHUP", onHangup))
      )
    }

    return {
      current,
      get: SubscriptionRef.get(current),
      changes: current.changes,
      rescanServers,
      reloadGlobal
    }
  })

/** Loads the configuration (failing with every problem found) and keeps it current while the scope lives. */
export const configStoreFromFiles = (options: ConfigStoreOptions) => Layer.scoped(ConfigStore, makeConfigStore(options))
