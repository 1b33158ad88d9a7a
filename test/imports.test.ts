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

/** Every cycle a depth-first walk meets in a graph of module -> imported modules, each as the path around it. */
const findCycles = (edges: ReadonlyMap<string, ReadonlyArray<string>>): Array<Array<string>> => {
  const cycles: Array<Array<string>> = []
  const state = new Map<string, "visiting" | "done">()
  const visit = (node: string, trail: Array<string>): void => {
    if (state.get(node) === "done") return
    if (state.get(node) === "visiting") {
      cycles.push([...trail.slice(trail.indexOf(node)), node])
      return
    }
    state.set(node, "visiting")
    for (const next of edges.get(node) ?? []) visit(next, [...trail, node])
    state.set(node, "done")
  }
  for (const node of edges.keys()) visit(node, [])
  return cycles
}

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

  it("no module imports itself through others (type-only imports count too): the graph has no cycle", () => {
    const resolve = (file: string, specifier: string) => path.resolve(path.dirname(file), specifier.replace(/\.js$/, ".ts"))
    const edges = new Map(files.map((file) => [file, specifiersOf(file).filter((s) => s.startsWith(".")).map((s) => resolve(file, s))]))
    expect(edges.size).toBe(files.length)
    expect(findCycles(edges).map((cycle) => cycle.map((file) => path.relative(SRC, file)).join(" -> "))).toEqual([])
  })

  it("the cycle finder reports a cycle when there is one", () => {
    const graph = new Map([["a", ["b"]], ["b", ["c", "d"]], ["c", ["a"]], ["d", []]])
    expect(findCycles(graph)).toEqual([["a", "b", "c", "a"]])
    expect(findCycles(new Map([["a", ["b"]], ["b", []]]))).toEqual([])
  })
})
