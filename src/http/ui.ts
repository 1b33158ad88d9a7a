/**
 * The web UI's files (src/http/ui/, copied to dist/http/ui/ by `npm run build`): plain HTML, CSS and ES
 * modules, read once at startup and served from memory. Only the files found there are served, so no request path
 * reaches the file system.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import { existsSync } from "node:fs"
import { readdir, readFile } from "node:fs/promises"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export class UiFilesMissing extends Data.TaggedError("UiFilesMissing")<{ readonly reason: string }> {}

export interface UiFile {
  readonly body: Uint8Array
  readonly contentType: string
  readonly etag: string
}

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json"
}

/**
 * Beside this module (src/http/, and tsc's dist/http/), or, from the bundle's chunk under dist/chunks/, in
 * dist/http/ui/ where the build copies it.
 */
export const UI_DIR = [new URL("./ui/", import.meta.url), new URL("../http/ui/", import.meta.url)]
  .map((url) => fileURLToPath(url))
  .find((dir) => existsSync(dir)) ?? fileURLToPath(new URL("./ui/", import.meta.url))

/** The UI's files by request path: `/` for index.html, `/assets/<name>` for the rest. */
export const loadUi = (dir: string = UI_DIR): Effect.Effect<ReadonlyMap<string, UiFile>, UiFilesMissing> =>
  Effect.tryPromise({
    try: async () => {
      const files = new Map<string, UiFile>()
      for (const name of (await readdir(dir)).sort()) {
        const contentType = CONTENT_TYPES[path.extname(name)]
        if (contentType === undefined) continue
        const body = new Uint8Array(await readFile(path.join(dir, name)))
        const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`
        files.set(name === "index.html" ? "/" : `/assets/${name}`, { body, contentType, etag })
      }
      if (!files.has("/")) throw new Error("index.html is missing")
      return files
    },
    catch: (error) => new UiFilesMissing({ reason: `cannot read the web UI's files in ${dir}: ${error instanceof Error ? error.message : String(error)}` })
  })
