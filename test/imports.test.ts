/** The source tree keeps the import rules of the design: one-way layers, and Effect's modules loaded by path. */
import { readdirSync, readFileSync } from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const SRC = path.resolve("src")

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(full)
    return entry.name.endsWith(".ts") ? [full] : []
  })

/** Module specifiers of static imports, re-exports and dynamic imports with a literal argument. */
const specifiersOf = (file: string): Array<string> => {
  const text = readFileSync(file, "utf8")
  const found: Array<string> = []
  for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^"'`;]*?from\s+["']([^"']+)["']/g)) found.push(match[1]!)
  for (const match of text.matchAll(/(?:^|\n)\s*import\s+["']([^"']+)["']/g)) found.push(match[1]!)
  for (const match of text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) found.push(match[1]!)
  return found
}

/** The top-level part of src/ a file or relative import lands in: "protocol", "services", "main.ts", ... */
const areaOf = (absolute: string): string => path.relative(SRC, absolute).split(path.sep)[0]!

const files = sourceFiles(SRC)

const portalImports = files.flatMap((file) =>
  specifiersOf(file)
    .filter((specifier) => specifier.startsWith("."))
    .map((specifier) => ({
      file: path.relative(SRC, file),
      from: areaOf(file),
      to: areaOf(path.resolve(path.dirname(file), specifier))
    }))
)

describe("imports", () => {
  it("the scan sees Portal's source and its relative imports", () => {
    expect(files.length).toBeGreaterThan(30)
    expect(portalImports.some((i) => i.from === "services" && i.to === "protocol")).toBe(true)
    expect(portalImports.some((i) => i.from === "layers" && i.to === "services")).toBe(true)
  })

  it("loads Effect's modules by path, never the effect index that loads all of them", () => {
    const offenders = files.filter((file) => specifiersOf(file).includes("effect")).map((file) => path.relative(SRC, file))
    expect(offenders).toEqual([])
  })

  it("protocol/ and schema/ import nothing else of Portal's", () => {
    const crossing = portalImports.filter((i) => (i.from === "protocol" || i.from === "schema") && i.to !== i.from)
    expect(crossing).toEqual([])
  })

  it("imports run one way: services never reach http/ or layers/, http/ never layers/, nothing imports main", () => {
    const allowed: Record<string, ReadonlyArray<string>> = {
      services: ["services", "protocol", "schema"],
      http: ["http", "services", "protocol", "schema"]
    }
    const backwards = portalImports.filter(
      (i) => i.to === "main.ts" || (allowed[i.from] !== undefined && !allowed[i.from]!.includes(i.to))
    )
    expect(backwards).toEqual([])
  })
})
