/** Portal as a real child process: `node dist/main.js ...`, with its output captured. */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { afterEach } from "vitest"
import { waitFor } from "./wait.js"

export const MAIN = path.resolve("dist/main.js")

/** The Node flags on main.js's first line (`#!/usr/bin/env -S node FLAGS`): tests run Portal as the `portal` command does. */
export const nodeFlagsOf = (file: string): Array<string> => {
  const first = readFileSync(file, "utf8").split("\n", 1)[0] ?? ""
  const words = first.replace(/^#!/, "").trim().split(/\s+/)
  return words.includes("node") ? words.slice(words.indexOf("node") + 1) : []
}
const NODE_FLAGS = nodeFlagsOf(MAIN)

export interface RunResult {
  readonly status: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs Portal to completion (for `--check`, `--help`, broken configurations). */
export const runPortal = (
  args: ReadonlyArray<string>,
  options: { cwd?: string; timeoutMs?: number; env?: Record<string, string> } = {}
): RunResult => {
  const result = spawnSync(process.execPath, [...NODE_FLAGS, MAIN, ...args], {
    cwd: options.cwd ?? process.cwd(),
    env: { ...process.env, ...options.env },
    encoding: "utf8",
    timeout: options.timeoutMs ?? 20_000
  })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr }
}

export interface PortalProcess {
  readonly child: ChildProcess
  /** Everything written so far to stdout and stderr. */
  output(): string
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
  /** Resolves with the exit code once the process has ended. */
  exited(): Promise<number | null>
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

const running: Array<PortalProcess> = []
afterEach(async () => {
  for (const portal of running.splice(0)) await portal.stop("SIGKILL")
})

/** Starts Portal in the background; stopped after each test. */
export const startPortal = (args: ReadonlyArray<string>, options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): PortalProcess => {
  const child = spawn(process.execPath, [...NODE_FLAGS, MAIN, ...args], {
    cwd: options.cwd ?? process.cwd(),
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let text = ""
  child.stdout!.on("data", (chunk: Buffer) => (text += chunk.toString()))
  child.stderr!.on("data", (chunk: Buffer) => (text += chunk.toString()))
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const portal: PortalProcess = {
    child,
    output: () => text,
    waitForOutput: (pattern, timeoutMs = 10_000) =>
      waitFor(() => text.match(pattern) ?? (child.exitCode !== null ? Promise.reject(new Error(`Portal exited (${child.exitCode}) before printing ${pattern}:\n${text}`)) : undefined), {
        timeoutMs,
        what: `output ${pattern}\n--- output so far ---\n${text}`
      }),
    exited: () => exit,
    stop: async (signal = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exit
    }
  }
  running.push(portal)
  return portal
}
