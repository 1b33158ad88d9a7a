/**
 * Without `[web]` no HTTP server code is loaded: nothing that `src/main.ts` loads at start (static, non-type imports,
 * followed through Portal's own files) reaches src/http/ or @effect/platform's HTTP server modules. The web layer
 * imports them on demand (layers/Web.ts), only when `[web]` is configured.
 */
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { SRC, staticallyLoaded } from "../helpers/staticImports.js"

const HTTP_SERVER_MODULES = /^@effect\/platform\/(HttpApi\w*|HttpLayerRouter|HttpRouter|HttpServer\w*|HttpApp|HttpMiddleware|OpenApi)$|^@effect\/platform-node\/NodeHttpServer$/

describe("the web plugin's code", () => {
  it("is not loaded at start: nothing main.ts loads reaches src/http/ or the HTTP server modules", () => {
    const { files, packages } = staticallyLoaded(path.join(SRC, "main.ts"))
    expect(files).toContain(path.join("layers", "Web.ts"))
    expect(files.length).toBeGreaterThan(40)
    expect(files.filter((file) => file.startsWith(`http${path.sep}`) || file === path.join("layers", "WebServer.ts"))).toEqual([])
    expect(packages.filter((name) => HTTP_SERVER_MODULES.test(name))).toEqual([])
  })

  it("is loaded on demand by the web layer, which does reach it", () => {
    expect(readFileSync(path.join(SRC, "layers", "Web.ts"), "utf8")).toMatch(/import\("\.\/WebServer\.js"\)/)
    const { files, packages } = staticallyLoaded(path.join(SRC, "layers", "WebServer.ts"))
    expect(files).toContain(path.join("http", "server.ts"))
    expect(packages).toContain("@effect/platform-node/NodeHttpServer")
  })
})
