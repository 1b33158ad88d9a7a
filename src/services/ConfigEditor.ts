/**
 * ConfigEditor: changes to the configuration files made from outside (the admin API). Every text is checked with
 * the same code a file on disk goes through (strict decoding, the `[web]` rules, favicons, conflicts with the other
 * servers) before anything is written; a write replaces the file atomically (temporary file and rename), then
 * ConfigStore applies it at once, as its file watch would.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as NodePath from "node:path"
import { findServerConflicts, type ServerIdentity } from "../schema/decode.js"
import { GlobalConfig } from "../schema/GlobalConfig.js"
import type { ConfigProblem } from "../schema/problems.js"
import { isNotFound, writeFileAtomic } from "./bans/atomicWrite.js"
import { ConfigError } from "./config/ConfigError.js"
import { checkGlobalFile, checkGlobalFileText, checkServerText, displayPath, listServerFiles } from "./config/load.js"
import { type ConfigSnapshot, ConfigStore, RESTART_ONLY_KEYS } from "./ConfigStore.js"
import { ServerManager } from "./ServerManager.js"

/** How long a server write waits for the server managers to take the new configuration in. */
const MANAGER_CATCH_UP = Duration.seconds(2)

/** A file could not be read, written or removed. */
export class ConfigWriteError extends Data.TaggedError("ConfigWriteError")<{ readonly reason: string }> {}

/** What a server id written in a path may be: it names the file `<id>.toml`, so no separator and no dot. */
export const SERVER_ID = /^[a-z0-9_-]+$/

/** What checking a `proxy.toml` text found: every problem, and the restart-only options it changes. */
export interface GlobalTextCheck {
  readonly problems: ReadonlyArray<ConfigProblem>
  readonly restartRequired: ReadonlyArray<string>
}

export interface ServerWrite {
  /** The file did not exist before. */
  readonly created: boolean
  /** The server is in the configuration in force after the write. */
  readonly applied: boolean
}

const encodeGlobal = Schema.encodeEither(GlobalConfig)

/** The restart-only options that differ between two versions of `proxy.toml` (compared in their file form). */
export const restartOnlyChanges = (before: GlobalConfig, after: GlobalConfig): Array<string> => {
  const old = Either.getOrUndefined(encodeGlobal(before))
  const next = Either.getOrUndefined(encodeGlobal(after))
  return RESTART_ONLY_KEYS.filter((key) => JSON.stringify(old?.[key] ?? before[key]) !== JSON.stringify(next?.[key] ?? after[key]))
}

export class ConfigEditor extends Effect.Service<ConfigEditor>()("portal/ConfigEditor", {
  effect: Effect.gen(function* () {
    const store = yield* ConfigStore
    const manager = yield* Effect.serviceOption(ServerManager)
    const fs = yield* FileSystem.FileSystem
    const client = yield* HttpClient.HttpClient
    const provide = <A, E>(effect: Effect.Effect<A, E, FileSystem.FileSystem | HttpClient.HttpClient>) =>
      effect.pipe(Effect.provideService(FileSystem.FileSystem, fs), Effect.provideService(HttpClient.HttpClient, client))
    const failure = (what: string) => (error: { readonly message: string }) => new ConfigWriteError({ reason: `${what}: ${error.message}` })
    /**
     * `proxy.toml` as Portal runs it: restart-only options keep their startup values (the running snapshot may hold a
     * key made for the run, which the file never had). Read when the admin API starts, right after Portal's start.
     */
    const startup = yield* store.get
    const running = Option.getOrElse(
      Option.fromNullable((yield* provide(checkGlobalFile(startup.configFile))).config),
      () => startup.global
    )
    const restartRequired = (next: GlobalConfig) => restartOnlyChanges(running, next)

    /**
     * Whether `id` may name a file: a loaded server's id, whatever its file is called (a file name or `id` key may
     * hold any characters), or a new id made only of [a-z0-9_-], so that no path can come out of the request.
     */
    const manageable = (snapshot: ConfigSnapshot, id: string): boolean => SERVER_ID.test(id) || snapshot.servers.has(id)

    /** The file that holds server `id`: the file it was loaded from, else `<servers_dir>/<id>.toml`. */
    const fileOf = (snapshot: ConfigSnapshot, id: string): string => {
      const loaded = snapshot.servers.get(id)
      // A definition's file is shown relative to the working directory, which does not change while Portal runs.
      return NodePath.resolve(loaded !== undefined ? loaded.file : NodePath.join(snapshot.global.servers_dir, `${id}.toml`))
    }

    /**
     * The loaded server, other than `id`, whose file `fileOf(id)` is: `alpha.toml` may hold server `hub` (its `name`
     * key), and a request for a new server `alpha` must not overwrite or remove it.
     */
    const occupantOf = (snapshot: ConfigSnapshot, id: string): string | undefined => {
      if (snapshot.servers.has(id)) return undefined
      const file = fileOf(snapshot, id)
      for (const server of snapshot.servers.values()) if (NodePath.resolve(server.file) === file) return server.id
      return undefined
    }

    /** Writes and removals one at a time: each checks against the configuration the one before it applied. */
    const writing = yield* Effect.makeSemaphore(1)

    const readIfPresent = (file: string) =>
      fs.readFileString(file).pipe(
        Effect.map(Option.some),
        Effect.catchIf(isNotFound, () => Effect.succeed(Option.none<string>())),
        Effect.mapError(failure(`cannot read ${displayPath(file)}`))
      )

    const checkServerAt = (snapshot: ConfigSnapshot, id: string, text: string) =>
      Effect.gen(function* () {
        const absolute = fileOf(snapshot, id)
        const file = displayPath(absolute)
        if (!manageable(snapshot, id)) {
          return [{ file, path: "", message: `a new server's id must match [a-z0-9_-]+, got ${JSON.stringify(id)}` }]
        }
        const occupant = occupantOf(snapshot, id)
        if (occupant !== undefined) {
          return [{ file, path: "", message: `this file holds server "${occupant}" (its name or id key): change it as "${occupant}", or choose another id` }]
        }
        const checked = yield* provide(checkServerText(absolute, text))
        const problems: Array<ConfigProblem> = [...checked.problems]
        const identity = checked.identity
        if (identity?.id !== undefined && identity.id !== id) {
          problems.push({
            file,
            path: identity.config.name !== undefined ? "name" : "id",
            message: `makes the server's id "${identity.id}" where the request is for "${id}"; remove it or make it "${id}"`
          })
        } else if (identity !== undefined) {
          const others: Array<ServerIdentity> = [...snapshot.servers.values()].filter((server) => server.file !== file)
          problems.push(...findServerConflicts([...others, identity]).problems.filter((problem) => problem.file === file))
        }
        return problems
      })

    /**
     * Checks `text` as server `id`'s file; without an id, as a new server's: under the id its `name` or `id` key
     * gives, else one no server and no file has (a placeholder such as "new" could be a real server's, whose own
     * domains would then not count as a clash).
     */
    const checkServer = (id: string | undefined, text: string): Effect.Effect<ReadonlyArray<ConfigProblem>> =>
      Effect.gen(function* () {
        const snapshot = yield* store.get
        if (id !== undefined) return yield* checkServerAt(snapshot, id, text)
        const identity = (yield* provide(checkServerText(NodePath.join(snapshot.global.servers_dir, "new.toml"), text))).identity
        // Only a key names it: the id a file name would give is the placeholder's.
        const own = identity?.config.name !== undefined || identity?.config.id !== undefined ? identity.id : undefined
        const existing = own === undefined ? undefined : snapshot.servers.get(own)
        if (existing !== undefined) {
          const path = identity?.config.name !== undefined ? "name" : "id"
          return [{ file: displayPath(fileOf(snapshot, existing.id)), path, message: `a server "${own}" exists already: a new server needs another id` }]
        }
        let fresh = own ?? "new"
        for (let n = 2; own === undefined && (snapshot.servers.has(fresh) || occupantOf(snapshot, fresh) !== undefined); n++) fresh = `new-${n}`
        return yield* checkServerAt(snapshot, fresh, text)
      })

    const writeServer = (id: string, text: string): Effect.Effect<ServerWrite, ConfigError | ConfigWriteError> =>
      writing.withPermits(1)(Effect.gen(function* () {
        const snapshot = yield* store.get
        const problems = yield* checkServerAt(snapshot, id, text)
        if (problems.length > 0) return yield* new ConfigError({ problems })
        const file = fileOf(snapshot, id)
        const existed = yield* fs.exists(file).pipe(Effect.mapError(failure(`cannot look at ${displayPath(file)}`)))
        yield* provide(writeFileAtomic(file, text)).pipe(Effect.mapError(failure(`cannot write ${displayPath(file)}`)))
        yield* Effect.logInfo(`${displayPath(file)} written through the admin API`)
        yield* store.rescanServers
        const after = yield* store.get
        // A [server_manager] is tracked from its first state on: the answer says what the server is, not what it was
        // before its manager caught up (bounded: a provider's first answer may be slow).
        if (Option.isSome(manager)) yield* manager.value.caughtUp(after.revision).pipe(Effect.timeoutOption(MANAGER_CATCH_UP))
        return { created: !existed, applied: after.servers.has(id) }
      }))

    const removeServer = (id: string): Effect.Effect<boolean, ConfigWriteError> =>
      writing.withPermits(1)(Effect.gen(function* () {
        const snapshot = yield* store.get
        if (!manageable(snapshot, id) || occupantOf(snapshot, id) !== undefined) return false
        const file = fileOf(snapshot, id)
        const removed = yield* fs.remove(file).pipe(
          Effect.as(true),
          Effect.catchIf(isNotFound, () => Effect.succeed(false)),
          Effect.mapError(failure(`cannot remove ${displayPath(file)}`))
        )
        if (!removed) return false
        yield* Effect.logInfo(`${displayPath(file)} removed through the admin API`)
        yield* store.rescanServers
        return true
      }))

    const checkGlobal = (text: string): Effect.Effect<GlobalTextCheck> =>
      Effect.gen(function* () {
        const snapshot = yield* store.get
        const checked = yield* provide(checkGlobalFileText(snapshot.configFile, text))
        // As at startup: a servers_dir that cannot be listed would stop the next start.
        const serversDir =
          checked.config === undefined ? [] : yield* provide(listServerFiles(checked.config.servers_dir)).pipe(
            Effect.match({ onFailure: (error) => error.problems, onSuccess: () => [] })
          )
        const problems = [...checked.problems, ...serversDir]
        return { problems, restartRequired: checked.config === undefined || problems.length > 0 ? [] : restartRequired(checked.config) }
      })

    return {
      /** The text of server `id`'s file and where it is; none when there is no such file. */
      serverText: (id: string): Effect.Effect<Option.Option<{ readonly file: string; readonly text: string }>, ConfigWriteError> =>
        Effect.flatMap(store.get, (snapshot) => {
          if (!manageable(snapshot, id) || occupantOf(snapshot, id) !== undefined) return Effect.succeedNone
          const file = fileOf(snapshot, id)
          return Effect.map(readIfPresent(file), Option.map((text) => ({ file: displayPath(file), text })))
        }),
      /** Every problem server `id`'s file would have with this text; nothing is written. */
      checkServer,
      /** Writes server `id`'s file after checking it, then applies it; fails with every problem, writing nothing. */
      writeServer,
      /** Removes server `id`'s file, then applies the change; false when there was no such file. */
      removeServer,
      /** The text of `proxy.toml`. */
      globalText: Effect.flatMap(store.get, (snapshot) =>
        fs.readFileString(snapshot.configFile).pipe(Effect.mapError(failure(`cannot read ${displayPath(snapshot.configFile)}`)))
      ),
      /** Every problem `proxy.toml` would have with this text (the `[web]` rules included); nothing is written. */
      checkGlobal,
      /** Writes `proxy.toml` after checking it, then reloads it; fails with every problem, writing nothing. */
      writeGlobal: (text: string): Effect.Effect<GlobalTextCheck, ConfigError | ConfigWriteError> =>
        writing.withPermits(1)(Effect.gen(function* () {
          const checked = yield* checkGlobal(text)
          if (checked.problems.length > 0) return yield* new ConfigError({ problems: checked.problems })
          const file = (yield* store.get).configFile
          yield* provide(writeFileAtomic(file, text)).pipe(Effect.mapError(failure(`cannot write ${displayPath(file)}`)))
          yield* Effect.logInfo(`${displayPath(file)} written through the admin API`)
          yield* store.reloadGlobal
          return checked
        })),
      /** Re-reads `proxy.toml` and every server file; a broken `proxy.toml` changes nothing and its problems are returned. */
      reload: Effect.gen(function* () {
        const snapshot = yield* store.get
        const checked = yield* provide(checkGlobalFile(snapshot.configFile))
        if (checked.problems.length > 0 || checked.config === undefined) {
          const result: GlobalTextCheck = { problems: checked.problems, restartRequired: [] }
          return result
        }
        yield* store.reloadGlobal
        const result: GlobalTextCheck = { problems: [], restartRequired: restartRequired(checked.config) }
        return result
      })
    }
  })
}) {}
