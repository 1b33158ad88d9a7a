/**
 * Without `[web]` no HTTP server code is loaded: nothing that `src/main.ts` loads at start (static, non-type imports,
 * followed through Portal's own files) reaches src/http/ or @effect/platform's HTTP server modules. The web layer
 * imports them on demand (layers/Web.ts), only when `[web]` is configured.
 */
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const SRC = path.resolve("src")

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

const walk = (entry: string) => {
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

const HTTP_SERVER_MODULES = /^@effect\/platform\/(HttpApi\w*|HttpLayerRouter|HttpRouter|HttpServer\w*|HttpApp|HttpMiddleware|OpenApi)$|^@effect\/platform-node\/NodeHttpServer$/

describe("the web plugin's code", () => {
  it("is not loaded at start: nothing main.ts loads reaches src/http/ or the HTTP server modules", () => {
    const { files, packages } = walk(path.join(SRC, "main.ts"))
    expect(files).toContain(path.join("layers", "Web.ts"))
    expect(files.length).toBeGreaterThan(40)
    expect(files.filter((file) => file.startsWith(`http${path.sep}`) || file === path.join("layers", "WebServer.ts"))).toEqual([])
    expect(packages.filter((name) => HTTP_SERVER_MODULES.test(name))).toEqual([])
  })

  it("is loaded on demand by the web layer, which does reach it", () => {
    expect(readFileSync(path.join(SRC, "layers", "Web.ts"), "utf8")).toMatch(/import\("\.\/WebServer\.js"\)/)
    const { files, packages } = walk(path.join(SRC, "layers", "WebServer.ts"))
    expect(files).toContain(path.join("http", "server.ts"))
    expect(packages).toContain("@effect/platform-node/NodeHttpServer")
  })
})
