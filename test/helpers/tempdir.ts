/** Temporary directories with real files, removed after the test. */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterEach } from "vitest"

const created: Array<string> = []

afterEach(() => {
  for (const dir of created.splice(0)) rmSync(dir, { recursive: true, force: true })
})

export interface ConfigDir {
  readonly root: string
  readonly configFile: string
  readonly serversDir: string
  write(relative: string, text: string): string
}

/** A directory with `proxy.toml` and an empty `servers/`. */
export const makeConfigDir = (proxyToml = "", servers: Record<string, string> = {}): ConfigDir => {
  const root = mkdtempSync(path.join(tmpdir(), "portal-test-"))
  created.push(root)
  const serversDir = path.join(root, "servers")
  mkdirSync(serversDir)
  const write = (relative: string, text: string) => {
    const target = path.join(root, relative)
    mkdirSync(path.dirname(target), { recursive: true })
    writeFileSync(target, text)
    return target
  }
  write("proxy.toml", proxyToml)
  for (const [name, text] of Object.entries(servers)) write(path.join("servers", name), text)
  return { root, configFile: path.join(root, "proxy.toml"), serversDir, write }
}
