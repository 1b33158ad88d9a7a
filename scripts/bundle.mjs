// `npm run build`, after tsc: bundles Portal's two entry points, dist/main.js and dist/worker.js (a worker thread's
// data plane), each with what it imports, and the modules loaded on demand (the web server, container discovery)
// in chunks of their own under dist/chunks/. tsc's per-module output stays beside them (tests and the bench load
// single modules from it); the bundles replace its main.js and worker.js.
//
// Why: Node keeps every loaded module's source text and records in each thread's heap. Loaded module by module,
// Portal and its dependencies were about 670 modules (Effect's sources with their documentation comments, and
// fast-check, which effect/Schema imports); bundled, only the code reachable from the entry points is loaded, once
// per thread, without comments. Startup RSS and each worker thread's share of it fall by a third or more
// (docs/benchmarks.md, "Startup memory").
import { build } from "esbuild"
import { rmSync } from "node:fs"

// Chunk names carry a hash of their content: clear the last build's.
rmSync("dist/chunks", { recursive: true, force: true })

await build({
  entryPoints: { main: "src/main.ts", worker: "src/worker.ts" },
  outdir: "dist",
  chunkNames: "chunks/[name]-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  tsconfig: "tsconfig.build.json",
  // CommonJS dependencies (ipaddr.js, ws) call require(); an ES module has none of its own.
  banner: { js: 'import { createRequire as __portalCreateRequire } from "node:module"; const require = __portalCreateRequire(import.meta.url);' },
  // The OpenTelemetry SDK and gRPC load only with [telemetry] (dist/chunks/TelemetrySdk-*.js): bundling them saves
  // nothing at start, and from node_modules they load as their authors ship and test them.
  external: ["@opentelemetry/*", "@grpc/*"],
  legalComments: "none",
  // Without line breaks and indentation the source each thread keeps is smaller, and so are V8's tables of line
  // starts: 1 to 4 MiB less RSS with two workers. Names stay; stack traces point into the source maps beside.
  minifyWhitespace: true,
  sourcemap: true,
  logLevel: "warning"
})
