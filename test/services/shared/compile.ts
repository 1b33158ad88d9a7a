/**
 * Real worker threads and child processes run plain JavaScript: this transpiles the shared-state modules and the
 * test's own worker scripts (TypeScript, type-checked with the rest) into a temporary directory with the same
 * layout, so their relative imports hold. The shared-state modules import nothing at run time but each other.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import ts from "typescript"

export interface Compiled {
  /** The JavaScript file made from `relative` (a path from the repository root, `.ts`). */
  readonly file: (relative: string) => string
  readonly remove: () => void
}

const ROOT = path.resolve(".")

/** Transpiles src/services/shared/ and the given test files into a fresh temporary directory. */
export const compileForThreads = (testFiles: ReadonlyArray<string>): Compiled => {
  const out = mkdtempSync(path.join(tmpdir(), "portal-shared-"))
  writeFileSync(path.join(out, "package.json"), JSON.stringify({ type: "module" }))
  const shared = readdirSync(path.join(ROOT, "src/services/shared"))
    .filter((name) => name.endsWith(".ts"))
    .map((name) => `src/services/shared/${name}`)
  for (const relative of [...shared, ...testFiles]) {
    const source = readFileSync(path.join(ROOT, relative), "utf8")
    const { outputText } = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false },
      fileName: relative
    })
    const target = path.join(out, relative.replace(/\.ts$/, ".js"))
    mkdirSync(path.dirname(target), { recursive: true })
    writeFileSync(target, outputText)
  }
  return {
    file: (relative) => path.join(out, relative.replace(/\.ts$/, ".js")),
    remove: () => rmSync(out, { recursive: true, force: true })
  }
}
