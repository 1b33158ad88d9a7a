/**
 * BanStore: persistent bans by IP address or range, player name and UUID, with expiry and an audit log.
 * The JSON file named by `[ban].file` is the record: every change is written to it atomically before it applies,
 * and edits made to it by hand while Portal runs are picked up (file watch plus a slow poll as a safety net).
 * The connection path calls only `dataPlane`: synchronous lookups in immutable in-memory indexes, so checking a
 * connection costs a map lookup and a short range scan. `layerMemory` keeps the bans in memory only, for tests.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as path from "node:path"
import { backupPath, readIfExists, removeStrayTempFiles, writeFileAtomic } from "./bans/atomicWrite.js"
import { type BanFileContent, decodeBanFile, encodeBanFile } from "./bans/file.js"
import {
  type AddBanInput,
  type BanRecord,
  type BanState,
  BanStoreError,
  type BanStoreSurface,
  makeBanState,
  toSeconds
} from "./bans/state.js"
import { ConfigStore } from "./ConfigStore.js"
import { fingerprintOf, statFingerprint, watchFiles } from "./files/watch.js"

export type { AuditAction, AuditEntry, Ban } from "./bans/file.js"
export { AUDIT_LOG_LIMIT } from "./bans/file.js"
export { banMessage, formatRemaining } from "./bans/message.js"
export type { AddBanInput, BanCandidate, BanChange, BanDataPlane, BanStoreSurface } from "./bans/state.js"
export { BanStoreError } from "./bans/state.js"
export type { BanTarget, BanTargetType } from "./bans/target.js"

/** Changes by hand are noticed by the watch at once; the poll only covers watches that miss events or fail. */
const POLL_INTERVAL = Duration.seconds(5)
/** Editors write in several steps; wait for them to settle before reading. */
const WATCH_DEBOUNCE = Duration.millis(100)

const EMPTY: BanFileContent = { bans: [], audit: [] }

/** The bans of the file at startup; a file that cannot be decoded is moved aside so the next write keeps it. */
const loadAtStartup = (file: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const startedAt = yield* Clock.currentTimeMillis
    const read = yield* Effect.either(readIfExists(file))
    const none = { content: EMPTY, text: undefined, broken: undefined }
    if (Either.isLeft(read)) {
      // Writes stay refused while the file cannot be read, so it is never replaced unseen.
      yield* Effect.logError(`${file}: cannot read the ban file (${read.left.message}); starting without bans`)
      return none
    }
    if (Option.isNone(read.right)) return none
    const text = read.right.value
    const decoded = decodeBanFile(text, toSeconds(startedAt))
    if (Either.isRight(decoded)) return { content: decoded.right, text, broken: undefined }
    const backup = yield* backupPath(file, startedAt)
    const moved = yield* Effect.either(fs.rename(file, backup))
    if (Either.isRight(moved)) {
      yield* Effect.logError(`${file}: the ban file is unreadable (${decoded.left}); moved it to ${backup} and starting without bans`)
      return none
    }
    // Left in place, it counts as broken by hand: reported now, and changes are refused until it is fixed.
    yield* Effect.logError(
      `${file}: the ban file is unreadable (${decoded.left}) and could not be moved aside ` +
        `(${moved.left.message}); starting without bans`
    )
    return { ...none, broken: text }
  })

/** The JSON file as the record of the bans, kept in step with edits made to it by hand. */
const makeFileStore = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  // `[ban]` is bound at startup (a SIGHUP that changes it is reported as needing a restart).
  const options = (yield* (yield* ConfigStore).get).global.ban
  const file = options.file
  const withFs = Effect.provideService(FileSystem.FileSystem, fs)

  // Startup: temporary files of an interrupted write go first.
  const stray = yield* withFs(removeStrayTempFiles(file))
  if (stray > 0) yield* Effect.logInfo(`${file}: removed ${stray} temporary file(s) left by an interrupted write`)
  const start = yield* withFs(loadAtStartup(file))
  const bans: BanState = yield* makeBanState({ auditEnabled: options.enable_audit_log, initial: start.content })
  /** The file's text as last read or written here (undefined: none). A watch event that finds it was our own write. */
  let known: string | undefined = start.text
  /** The text of a broken file already reported, so that the watch and the poll report it once. */
  let reported: string | undefined = start.broken
  /**
   * The file's size, mtime and inode when `known` was last read or written: while they stay the same, a change need
   * not read the file again to find an edit made by hand (with 100,000 bans that read is 12 MB).
   */
  let knownPrint: string | undefined = undefined

  /**
   * Brings memory in line with the file when something else changed it. Returns the problem when the file on disk
   * cannot be decoded (memory then stays as it was). Call with the lock held.
   */
  const syncWithDisk = Effect.gen(function* () {
    // Taken before the read: an edit between the two is read now and seen again (as a new print) next time.
    const print = yield* statFingerprint(fs, file)
    if (print === knownPrint) return Option.none<readonly [string, string]>()
    const text = Option.getOrUndefined(yield* withFs(readIfExists(file)))
    if (text === known) {
      knownPrint = print
      return Option.none<readonly [string, string]>()
    }
    if (text === undefined) {
      // Deleting the file is not taken as unbanning everyone: the bans stay and the next change writes them back.
      known = text
      knownPrint = print
      const kept = (yield* bans.get).index.all.size
      yield* Effect.logWarning(`${file} was removed; keeping ${kept} ban(s) in memory until the next change writes it again`)
      return Option.none()
    }
    const decoded = decodeBanFile(text, toSeconds(yield* Clock.currentTimeMillis))
    if (Either.isLeft(decoded)) return Option.some([text, decoded.left] as const)
    yield* bans.replace(decoded.right)
    known = text
    knownPrint = print
    reported = undefined
    yield* Effect.logInfo(`${file} changed on disk: ${(yield* bans.get).index.all.size} ban(s) loaded`)
    return Option.none()
  })

  /** Reacts to the watch and the poll; never fails. */
  const refresh = bans.lock.withPermits(1)(
    Effect.gen(function* () {
      const result = yield* Effect.either(syncWithDisk)
      if (Either.isLeft(result)) {
        yield* Effect.logWarning(`${file}: cannot read the ban file (${result.left.message}); keeping the bans loaded before`)
        return
      }
      if (Option.isNone(result.right)) return
      const [text, problem] = result.right.value
      if (reported === text) return
      reported = text
      const kept = (yield* bans.get).index.all.size
      yield* Effect.logError(`${file}: the ban file is unreadable (${problem}); keeping the ${kept} ban(s) loaded before`)
    })
  )

  // A change first takes in any edit made by hand; a file broken by hand is not overwritten, so the edit is not
  // lost while someone fixes it.
  const record: BanRecord = {
    beforeChange: Effect.gen(function* () {
      const synced = yield* syncWithDisk.pipe(
        Effect.mapError((error) => new BanStoreError({ reason: `cannot read ${file}: ${error.message}` }))
      )
      if (Option.isSome(synced)) {
        return yield* new BanStoreError({
          reason: `${file} is unreadable (${synced.value[1]}); fix or remove it before changing bans`
        })
      }
    }),
    // The file is replaced only if it is still as `beforeChange` saw it: an edit by hand saved while the new content
    // was written (and flushed to disk) would otherwise be lost; the change is then made again on top of it.
    write: (content) => {
      const text = encodeBanFile(content)
      const unchanged = Effect.map(statFingerprint(fs, file), (print) => print === knownPrint)
      return withFs(writeFileAtomic(file, text, unchanged)).pipe(
        Effect.mapError((error) => new BanStoreError({ reason: `cannot write ${file}: ${error.message}` })),
        Effect.map(
          Option.match({
            onNone: () => false,
            onSome: (written) => {
              known = text
              knownPrint = fingerprintOf(written)
              return true
            }
          })
        )
      )
    }
  }

  // Hand edits: the directory is watched (the file itself is replaced on every write, which would end a watch on
  // it), events for other names are ignored, and the content comparison in `syncWithDisk` skips our own writes.
  // The watch waits on the real clock, not on the environment's: the file changes in real time whatever clock
  // drives the bans, and a poll every 5 s on a TestClock would run once per 5 s of every step a test takes (a test
  // that moves the clock a week on would poll 120,960 times). Expiry and purging stay on the environment's clock.
  yield* watchFiles({
    dir: path.dirname(file),
    fileName: path.basename(file),
    subject: `changes to ${path.basename(file)}`,
    debounce: WATCH_DEBOUNCE,
    pollInterval: POLL_INTERVAL,
    fingerprint: statFingerprint(fs, file),
    onChange: refresh,
    clock: Clock.make()
  })
  return yield* bans.surface(record, options.purge_interval)
})

export interface BanStoreMemoryOptions {
  /** Bans in force from the start, made as `add` makes them. */
  readonly bans?: ReadonlyArray<AddBanInput>
  readonly purgeInterval?: Duration.DurationInput
  readonly enableAuditLog?: boolean
}

/** Bans in memory only: the same surface and expiry rules (on Effect's Clock), with nothing to read or write. */
const makeMemoryStore = (options: BanStoreMemoryOptions) =>
  Effect.gen(function* () {
    const bans = yield* makeBanState({ auditEnabled: options.enableAuditLog ?? true, initial: EMPTY })
    const record: BanRecord = { beforeChange: Effect.void, write: () => Effect.succeed(true) }
    const surface = yield* bans.surface(record, options.purgeInterval ?? Duration.minutes(5))
    for (const ban of options.bans ?? []) yield* surface.add(ban)
    return surface
  })

export class BanStore extends Effect.Service<BanStore>()("portal/BanStore", {
  scoped: Effect.map(makeFileStore, (surface): BanStoreSurface => surface)
}) {
  /** Bans in memory only (no file, no ConfigStore): for tests of the connection path and of what uses bans. */
  static readonly layerMemory = (options: BanStoreMemoryOptions = {}): Layer.Layer<BanStore, BanStoreError> =>
    Layer.scoped(
      BanStore,
      Effect.map(makeMemoryStore(options), (surface) => BanStore.make(surface))
    )
}
