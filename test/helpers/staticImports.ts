/**
 * What a module of src/ loads when it is loaded, followed through Portal's own files: static imports and re-exports,
 * type-only ones and dynamic `import()` left out. The loading tests use it to show that an optional part (the web
 * server, telemetry) is not reached from an entry point.
 */
import { readFileSync } from "node:fs"
import * as path from "node:path"

export const SRC = path.resolve("src")

/** Specifiers a module loads when it is loaded: static imports and re-exports, type-only ones left out. */
const loadedBy = (file: string): Array<string> => {
  const text = readFileSync(file, "utf8")
  const found: Array<string> = []
  for (const match of text.matchAll(/(?:^|\n)\s*(import|export)\s+(type\s+)?[^"'`;]*?from\s+["']([^"']+)["']/g)) {
    if (match[2] === undefined) found.push(match[3]!)
  }
  for (const match of text.matchAll(/(?:^|\n)\s*import\s+["']([^"']+)["']/g)) found.push(match[1]!)
  return found
}

/** Portal's files (relative to src/) and the packages `entry` loads, directly or through Portal's files. */
export const staticallyLoaded = (entry: string): { readonly files: Array<string>; readonly packages: Array<string> } => {
  const seen = new Set<string>()
  const packages = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    for (const specifier of loadedBy(file)) {
      if (specifier.startsWith(".")) visit(path.resolve(path.dirname(file), specifier.replace(/\.js$/, ".ts")))
      else packages.add(specifier)
    }
  }
  visit(entry)
  return { files: [...seen].map((file) => path.relative(SRC, file)), packages: [...packages] }
}
