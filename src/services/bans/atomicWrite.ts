/**
 * Crash-safe replacement of a small file: write a temporary file beside it, fsync it, rename it over the target,
 * fsync the directory. A crash at any point leaves the old or the new complete file, plus at worst a stray
 * temporary file that `removeStrayTempFiles` deletes at the next start.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { randomBytes } from "node:crypto"
import * as path from "node:path"

const tempPrefix = (file: string) => `.${path.basename(file)}.tmp-`

/** Whether a name in the file's directory is one of its temporary files. */
export const isTempFileOf = (file: string, name: string): boolean => name.startsWith(tempPrefix(file))

/**
 * Writes `text` to `file` as described above and returns what the file is then. With `unchanged`, asked after the
 * temporary file is on disk and just before the rename: when it says the file changed meanwhile (an edit by hand
 * during the write, which flushing to disk makes last milliseconds), nothing is replaced and the result is none.
 */
export const writeFileAtomic = (
  file: string,
  text: string,
  unchanged?: Effect.Effect<boolean>
): Effect.Effect<Option.Option<FileSystem.File.Info>, PlatformError, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const dir = path.dirname(file)
    yield* fs.makeDirectory(dir, { recursive: true })
    // Keep the permissions an operator gave the file (a rename would otherwise reset them).
    const mode = yield* fs.stat(file).pipe(
      Effect.map((info) => info.mode & 0o777),
      Effect.orElseSucceed(() => 0o644)
    )
    const temp = path.join(dir, `${tempPrefix(file)}${process.pid}-${randomBytes(4).toString("hex")}`)
    // What the file is once written, from the temporary file itself (a rename keeps size, mtime and inode): a stat of
    // the name afterwards could see an edit made since.
    const written = yield* Effect.scoped(
      Effect.gen(function* () {
        const handle = yield* fs.open(temp, { flag: "wx", mode })
        yield* handle.writeAll(new TextEncoder().encode(text))
        yield* handle.sync
        return yield* handle.stat
      })
    ).pipe(Effect.onError(() => fs.remove(temp).pipe(Effect.ignore)))
    if (unchanged !== undefined && !(yield* unchanged)) {
      yield* fs.remove(temp).pipe(Effect.ignore)
      return Option.none()
    }
    yield* fs.rename(temp, file).pipe(Effect.onError(() => fs.remove(temp).pipe(Effect.ignore)))
    // Makes the rename itself durable. Some platforms cannot open a directory; the file is in place regardless.
    yield* Effect.scoped(Effect.flatMap(fs.open(dir, { flag: "r" }), (handle) => handle.sync)).pipe(Effect.ignore)
    return Option.some(written)
  })

/** Deletes temporary files left by a write that a crash interrupted; returns how many. */
export const removeStrayTempFiles = (file: string): Effect.Effect<number, never, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const dir = path.dirname(file)
    const names = yield* fs.readDirectory(dir).pipe(Effect.orElseSucceed((): Array<string> => []))
    let removed = 0
    for (const name of names.filter((name) => isTempFileOf(file, name))) {
      const ok = yield* fs.remove(path.join(dir, name)).pipe(Effect.as(true), Effect.orElseSucceed(() => false))
      if (ok) removed += 1
    }
    return removed
  })

/** Where a file that cannot be read is moved: `<file>.bak`, or `<file>.bak.<epochms>` when that is taken. */
export const backupPath = (file: string, nowMs: number): Effect.Effect<string, never, FileSystem.FileSystem> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const plain = `${file}.bak`
    const taken = yield* fs.exists(plain).pipe(Effect.orElseSucceed(() => true))
    return taken ? `${plain}.${nowMs}` : plain
  })

export const isNotFound = (error: PlatformError): boolean => error._tag === "SystemError" && error.reason === "NotFound"

/** The file's text, or none when it does not exist. */
export const readIfExists = (file: string): Effect.Effect<Option.Option<string>, PlatformError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    fs.readFileString(file).pipe(
      Effect.map(Option.some),
      Effect.catchIf(isNotFound, () => Effect.succeedNone)
    )
  )
