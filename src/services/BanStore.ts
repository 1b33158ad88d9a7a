/**
 * BanStore: persistent bans by IP address or range, player name and UUID, with expiry and an audit log.
 * The JSON file named by `[ban].file` is the record: every change is written to it atomically before it applies,
 * and edits made to it by hand while Portal runs are picked up (file watch plus a slow poll as a safety net).
 * Lookups read immutable in-memory indexes, so checking a connection costs a map lookup and a short range scan.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { backupPath, isNotFound, readIfExists, removeStrayTempFiles, writeFileAtomic } from "./bans/atomicWrite.js"
import { AUDIT_LOG_LIMIT, type AuditEntry, type Ban, type BanFileContent, decodeBanFile, encodeBanFile } from "./bans/file.js"
import { type BanIndex, buildIndex, EMPTY_INDEX, findIpBan, findPlayerBan, isActive } from "./bans/lookup.js"
import { type BanTarget, describeTarget, normaliseTarget, targetKey } from "./bans/target.js"
import { ConfigStore } from "./ConfigStore.js"

export type { AuditAction, AuditEntry, Ban } from "./bans/file.js"
export { AUDIT_LOG_LIMIT } from "./bans/file.js"
export { banMessage, formatRemaining } from "./bans/message.js"
export type { BanTarget, BanTargetType } from "./bans/target.js"

export class BanStoreError extends Data.TaggedError("BanStoreError")<{ readonly reason: string }> {}

export interface AddBanInput {
  readonly target: BanTarget
  readonly reason: string
  readonly source: string
  /** How long the ban lasts; without it (or infinite) the ban is permanent. */
  readonly duration?: Duration.DurationInput
}

/** Changes by hand are noticed by the watch at once; the poll only covers watches that miss events or fail. */
const POLL_INTERVAL = Duration.seconds(5)
/** Editors write in several steps; wait for them to settle before reading. */
const WATCH_DEBOUNCE_MS = 100

interface State {
  readonly index: BanIndex
  readonly audit: ReadonlyArray<AuditEntry>
  /** The file's text as last read or written here (undefined: none). A watch event that finds it was our own write. */
  readonly text: string | undefined
}

/** What a change does to the file, and the audit entries to log once it is written. */
interface Change<A> {
  readonly result: A
  /** Undefined: nothing to write. */
  readonly next?: BanFileContent
  readonly report?: ReadonlyArray<AuditEntry>
}

const toSeconds = (millis: number) => Math.floor(millis / 1000)

const formatExpiry = (expiresAt: number | null | undefined) =>
  expiresAt === null || expiresAt === undefined ? "permanent" : `until ${new Date(expiresAt * 1000).toISOString()}`

/** One log line per audit entry: target, expiry, reason and source. */
const describeAudit = (entry: AuditEntry): string => {
  const details = [
    entry.action === "ban"
      ? formatExpiry(entry.expires_at)
      : entry.action === "expire" && typeof entry.expires_at === "number"
        ? `ended ${new Date(entry.expires_at * 1000).toISOString()}`
        : undefined,
    entry.reason === undefined ? undefined : `reason ${JSON.stringify(entry.reason)}`,
    entry.source === undefined ? undefined : `source ${JSON.stringify(entry.source)}`
  ].filter((part) => part !== undefined)
  const verb = entry.action === "ban" ? "ban added" : entry.action === "unban" ? "ban removed" : "ban expired"
  return `${verb}: ${describeTarget(entry.target)} (${details.join(", ")})`
}

const banAudit = (action: "ban" | "expire", ban: Ban, at: number): AuditEntry =>
  action === "ban"
    ? { at, action, target: ban.target, reason: ban.reason, source: ban.source, expires_at: ban.expires_at }
    : { at, action, target: ban.target, reason: ban.reason, expires_at: ban.expires_at }

/** The connection path's surface: synchronous lookups at `nowMs` (epoch ms). */
export interface BanStoreDataPlane {
  /** The ban that applies to a client address, if any (every accepted connection). */
  readonly ipBan: (ip: string, nowMs: number) => Ban | undefined
  /** The ban that applies to a player by UUID (when known) or name, if any. */
  readonly playerBan: (player: { readonly name: string; readonly uuid: string | undefined }, nowMs: number) => Ban | undefined
}

export class BanStore extends Effect.Service<BanStore>()("portal/BanStore", {
  scoped: Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    // `[ban]` is bound at startup (a SIGHUP that changes it is reported as needing a restart).
    const options = (yield* (yield* ConfigStore).get).global.ban
    const file = options.file
    const auditEnabled = options.enable_audit_log
    const withFs = Effect.provideService(FileSystem.FileSystem, fs)

    // Startup: temporary files of an interrupted write go; a file that cannot be decoded is moved aside so that
    // the next write does not destroy what it held.
    const stray = yield* withFs(removeStrayTempFiles(file))
    if (stray > 0) yield* Effect.logInfo(`${file}: removed ${stray} temporary file(s) left by an interrupted write`)
    const empty: State = { index: EMPTY_INDEX, audit: [], text: undefined }
    const state = yield* Ref.make<State>(empty)
    /** The state last set, read synchronously by the checks every connection makes. */
    let latest: State = empty
    const setState = (next: State) => Effect.zipRight(Effect.sync(() => (latest = next)), Ref.set(state, next))
    /** The text of a broken file already reported, so that the watch and the poll report it once. */
    const reported = yield* Ref.make<string | undefined>(undefined)
    const startedAt = yield* Clock.currentTimeMillis
    const read = yield* Effect.either(withFs(readIfExists(file)))
    if (Either.isLeft(read)) {
      // Writes stay refused while the file cannot be read, so it is never replaced unseen.
      yield* Effect.logError(`${file}: cannot read the ban file (${read.left.message}); starting without bans`)
    } else if (Option.isSome(read.right)) {
      const text = read.right.value
      const decoded = decodeBanFile(text, toSeconds(startedAt))
      if (Either.isRight(decoded)) {
        yield* setState({ index: buildIndex(decoded.right.bans), audit: decoded.right.audit, text })
      } else {
        const backup = yield* withFs(backupPath(file, startedAt))
        const moved = yield* Effect.either(fs.rename(file, backup))
        if (Either.isRight(moved)) {
          yield* Effect.logError(
            `${file}: the ban file is unreadable (${decoded.left}); moved it to ${backup} and starting without bans`
          )
        } else {
          // Left in place, it counts as broken by hand: reported now, and changes are refused until it is fixed.
          yield* Ref.set(reported, text)
          yield* Effect.logError(
            `${file}: the ban file is unreadable (${decoded.left}) and could not be moved aside ` +
              `(${moved.left.message}); starting without bans`
          )
        }
      }
    }
    // One writer at a time: every change reads, writes and publishes under this lock.
    const lock = yield* Effect.makeSemaphore(1)

    /**
     * Brings memory in line with the file when something else changed it. Returns the problem when the file on disk
     * cannot be decoded (memory then stays as it was). Call with the lock held.
     */
    const syncWithDisk = Effect.gen(function* () {
      const text = Option.getOrUndefined(yield* withFs(readIfExists(file)))
      const current = yield* Ref.get(state)
      if (text === current.text) return Option.none<readonly [string, string]>()
      if (text === undefined) {
        // Deleting the file is not taken as unbanning everyone: the bans stay and the next change writes them back.
        yield* setState({ ...current, text })
        yield* Effect.logWarning(
          `${file} was removed; keeping ${current.index.all.size} ban(s) in memory until the next change writes it again`
        )
        return Option.none()
      }
      const decoded = decodeBanFile(text, toSeconds(yield* Clock.currentTimeMillis))
      if (Either.isLeft(decoded)) return Option.some([text, decoded.left] as const)
      const next: State = { index: buildIndex(decoded.right.bans), audit: decoded.right.audit, text }
      yield* setState(next)
      yield* Ref.set(reported, undefined)
      yield* Effect.logInfo(`${file} changed on disk: ${next.index.all.size} ban(s) loaded`)
      return Option.none()
    })

    /** Reacts to the watch and the poll; never fails. */
    const refresh = lock.withPermits(1)(
      Effect.gen(function* () {
        const result = yield* Effect.either(syncWithDisk)
        if (Either.isLeft(result)) {
          yield* Effect.logWarning(
            `${file}: cannot read the ban file (${result.left.message}); keeping the bans loaded before`
          )
          return
        }
        if (Option.isNone(result.right)) return
        const [text, problem] = result.right.value
        if ((yield* Ref.get(reported)) === text) return
        yield* Ref.set(reported, text)
        const kept = (yield* Ref.get(state)).index.all.size
        yield* Effect.logError(`${file}: the ban file is unreadable (${problem}); keeping the ${kept} ban(s) loaded before`)
      })
    )

    /**
     * Applies a change: first takes in any edit made by hand, then writes the new file, and only then lets the
     * change apply. A file broken by hand is not overwritten, so the edit is not lost while someone fixes it.
     * Once the lock is held the change runs to the end, so a caller that gives up cannot leave the file and
     * memory apart.
     */
    const change = <A>(f: (current: State, nowMs: number) => Change<A>): Effect.Effect<A, BanStoreError> =>
      Effect.gen(function* () {
        const synced = yield* syncWithDisk.pipe(
          Effect.mapError((error) => new BanStoreError({ reason: `cannot read ${file}: ${error.message}` }))
        )
        if (Option.isSome(synced)) {
          return yield* new BanStoreError({
            reason: `${file} is unreadable (${synced.value[1]}); fix or remove it before changing bans`
          })
        }
        const { result, next, report = [] } = f(yield* Ref.get(state), yield* Clock.currentTimeMillis)
        if (next === undefined) return result
        const text = encodeBanFile(next)
        yield* withFs(writeFileAtomic(file, text)).pipe(
          Effect.mapError((error) => new BanStoreError({ reason: `cannot write ${file}: ${error.message}` }))
        )
        yield* setState({ index: buildIndex(next.bans), audit: next.audit, text })
        if (auditEnabled) yield* Effect.forEach(report, (entry) => Effect.logInfo(describeAudit(entry)), { discard: true })
        return result
      }).pipe(Effect.uninterruptible, lock.withPermits(1))

    /** The audit log after recording `entries`: unchanged when the audit log is disabled. */
    const appendAudit = (audit: ReadonlyArray<AuditEntry>, entries: ReadonlyArray<AuditEntry>) =>
      !auditEnabled || entries.length === 0 ? audit : [...audit, ...entries].slice(-AUDIT_LOG_LIMIT)

    const add = (input: AddBanInput): Effect.Effect<Ban, BanStoreError> =>
      Effect.gen(function* () {
        const target = yield* Either.mapLeft(normaliseTarget(input.target), (reason) => new BanStoreError({ reason }))
        const duration = input.duration === undefined ? Duration.infinity : Duration.decode(input.duration)
        if (Duration.isFinite(duration) && Duration.toMillis(duration) <= 0) {
          return yield* new BanStoreError({ reason: `a ban must last longer than 0 seconds, got ${Duration.format(duration)}` })
        }
        return yield* change((current, nowMs) => {
          const ban: Ban = {
            target,
            reason: input.reason,
            created_at: toSeconds(nowMs),
            // Rounded up: a ban never ends before the time it was given for.
            expires_at: Duration.isFinite(duration) ? Math.ceil((nowMs + Duration.toMillis(duration)) / 1000) : null,
            source: input.source
          }
          const key = targetKey(target)
          const bans = [...current.index.all.values()].filter((other) => targetKey(other.target) !== key)
          bans.push(ban)
          const entries = [banAudit("ban", ban, toSeconds(nowMs))]
          return { result: ban, next: { bans, audit: appendAudit(current.audit, entries) }, report: entries }
        })
      })

    const remove = (target: BanTarget, source: string): Effect.Effect<boolean, BanStoreError> =>
      Effect.gen(function* () {
        const normal = yield* Either.mapLeft(normaliseTarget(target), (reason) => new BanStoreError({ reason }))
        const key = targetKey(normal)
        return yield* change((current, nowMs) => {
          const existing = current.index.all.get(key)
          if (existing === undefined) return { result: false }
          const bans = [...current.index.all.values()].filter((ban) => ban !== existing)
          // A ban that had already run out is recorded as expired, not as lifted by someone.
          const active = isActive(existing, nowMs)
          const entries: ReadonlyArray<AuditEntry> = active
            ? [{ at: toSeconds(nowMs), action: "unban", target: existing.target, source }]
            : [banAudit("expire", existing, toSeconds(nowMs))]
          return { result: active, next: { bans, audit: appendAudit(current.audit, entries) }, report: entries }
        })
      })

    /** Removes expired bans from the file (they stopped applying at their expiry already), recording each. */
    const purge = change((current, nowMs) => {
      const all = [...current.index.all.values()]
      const expired = all.filter((ban) => !isActive(ban, nowMs))
      if (expired.length === 0) return { result: undefined }
      const entries = expired.map((ban) => banAudit("expire", ban, toSeconds(nowMs)))
      const bans = all.filter((ban) => isActive(ban, nowMs))
      return { result: undefined, next: { bans, audit: appendAudit(current.audit, entries) }, report: entries }
    }).pipe(
      Effect.catchAll((error) => Effect.logWarning(`expired bans not purged: ${error.reason}`)),
      Effect.asVoid
    )

    // Hand edits: watch the directory (the file itself is replaced on every write, which would end a watch on it),
    // keep only events for the file's name, and let the content comparison in `syncWithDisk` skip our own writes.
    const run = yield* FiberSet.makeRuntime<never>()
    const dir = path.dirname(file)
    const base = path.basename(file)
    const watch: { watcher: NodeFs.FSWatcher | undefined; timer: NodeJS.Timeout | undefined; warned: boolean } = {
      watcher: undefined,
      timer: undefined,
      warned: false
    }
    const ensureWatching = Effect.sync(() => {
      if (watch.watcher !== undefined) return undefined
      try {
        const watcher = NodeFs.watch(dir, { persistent: false }, (_event, name) => {
          if (name !== null && name !== base) return
          clearTimeout(watch.timer)
          watch.timer = setTimeout(() => run(refresh), WATCH_DEBOUNCE_MS)
        })
        watcher.on("error", (error) => {
          watcher.close()
          if (watch.watcher === watcher) watch.watcher = undefined
          run(Effect.logWarning(`watching ${dir} stopped (${error.message}); changes to ${base} are picked up by polling`))
        })
        watch.watcher = watcher
        watch.warned = false
        return undefined
      } catch (error) {
        if (watch.warned) return undefined
        watch.warned = true
        return error instanceof Error ? error.message : String(error)
      }
    }).pipe(
      Effect.flatMap((problem) =>
        problem === undefined
          ? Effect.void
          : Effect.logWarning(`cannot watch ${dir} (${problem}); changes to ${base} are picked up by polling`)
      )
    )
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        clearTimeout(watch.timer)
        watch.watcher?.close()
        watch.watcher = undefined
      })
    )
    yield* ensureWatching

    // The poll compares size, mtime and inode only; the content comparison decides whether anything changed.
    const lastSeen = yield* Ref.make<string | undefined>(undefined)
    const poll = Effect.gen(function* () {
      yield* ensureWatching
      const seen = yield* fs.stat(file).pipe(
        Effect.map((info) => {
          const mtime = Option.getOrUndefined(Option.map(info.mtime, (date) => date.getTime()))
          return `${info.size}:${mtime}:${Option.getOrUndefined(info.ino)}`
        }),
        Effect.catchAll((error) => Effect.succeed(isNotFound(error) ? "missing" : `error ${error.message}`))
      )
      if (seen === (yield* Ref.getAndSet(lastSeen, seen))) return
      yield* refresh
    })
    // The poll looks at the real file system, so it waits in real time even where a TestClock drives expiry
    // (stepping a test clock through hours would otherwise run it hundreds of times).
    const realClock = Clock.make()
    yield* poll.pipe(
      Effect.zipLeft(Effect.withClock(Effect.sleep(POLL_INTERVAL), realClock)),
      Effect.forever,
      Effect.forkScoped
    )
    yield* purge.pipe(Effect.repeat(Schedule.spaced(options.purge_interval)), Effect.forkScoped)

    const now = Clock.currentTimeMillis
    const dataPlane: BanStoreDataPlane = {
      ipBan: (ip, nowMs) => findIpBan(latest.index, ip, nowMs),
      playerBan: (player, nowMs) => findPlayerBan(latest.index, player, nowMs)
    }
    return {
      dataPlane,
      /** Bans a target (replacing any ban of the same target); the change is on disk when this succeeds. */
      add,
      /** Lifts the ban of a target; true when an active ban was removed. */
      remove,
      /** Bans in force now, in the order they were made. */
      list: Effect.map(Effect.zip(Ref.get(state), now), ([current, nowMs]): ReadonlyArray<Ban> =>
        [...current.index.all.values()].filter((ban) => isActive(ban, nowMs))
      ),
      /** The audit log as it is in the file, oldest first. */
      audit: Effect.map(Ref.get(state), (current): ReadonlyArray<AuditEntry> => current.audit)
    }
  })
}) {}
