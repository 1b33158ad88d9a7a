// @ts-check
/**
 * The game scenario's native load (native/gameload.c): built here with the system C compiler, then driven over its
 * stdin and stdout, one JSON line per answer, with the same `ask` interface as the forked Node.js peers.
 */
import { spawn, spawnSync } from "node:child_process"
import * as path from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"

/** As the Node.js generator: each session sends a packet every 50 ms. */
const GAME_PERIOD_MS = 50
const SOURCE = fileURLToPath(new URL("./native/gameload.c", import.meta.url))

/**
 * Compiles the load into `dir` with the system C compiler, with OpenSSL's libcrypto where it links (the encrypted
 * logins of the client_only target need it); otherwise says why there is none. `crypto` says whether it has it.
 * @param {string} dir
 * @returns {{ binary: string, crypto: boolean } | { reason: string }}
 */
export const buildNativeLoad = (dir) => {
  if (process.platform !== "linux") return { reason: "it needs Linux (epoll, timerfd)" }
  const binary = path.join(dir, "gameload")
  let failure = "no C compiler (cc, gcc or g++) found"
  // g++ compiles C too when told the language: a machine set up only for the addon's C++ has it.
  for (const [compiler, ...language] of [["cc"], ["gcc"], ["g++", "-x", "c"]]) {
    for (const crypto of [true, false]) {
      const flags = crypto ? ["-DWITH_CRYPTO"] : []
      const libraries = crypto ? ["-lcrypto"] : []
      const result = spawnSync(/** @type {string} */ (compiler), ["-O2", ...flags, ...language, "-o", binary, SOURCE, ...libraries], { encoding: "utf8" })
      if (result.status === 0) return { binary, crypto }
      if (result.error === undefined) failure = `${compiler} failed: ${(result.stderr ?? "").trim().split("\n")[0]}`
    }
  }
  return { reason: failure }
}

/**
 * Starts the load in one of its modes. `first` resolves with its first line (the echo backend's port, or the
 * generator's logins); `ask("snapshot")` with the next; `stop()` closes its stdin, which ends it.
 * @param {string} binary @param {Array<string>} args
 */
const start = (binary, args) => {
  const child = spawn(binary, args, { stdio: ["pipe", "pipe", "inherit"] })
  /** @type {Array<{ resolve: (value: any) => void, reject: (error: Error) => void }>} */
  const waiting = []
  const exited = new Promise((resolve) => child.once("exit", resolve))
  createInterface({ input: /** @type {import("node:stream").Readable} */ (child.stdout) }).on("line", (line) => {
    const next = waiting.shift()
    try {
      next?.resolve(JSON.parse(line))
    } catch {
      next?.reject(new Error(`gameload ${args[0]}: not JSON: ${line}`))
    }
  })
  child.once("exit", (code, signal) => {
    for (const next of waiting.splice(0)) next.reject(new Error(`gameload ${args[0]} exited (${code ?? signal})`))
  })
  child.stdin?.on("error", () => {})
  const nextLine = () => new Promise((resolve, reject) => waiting.push({ resolve, reject }))
  const first = nextLine()
  return {
    pid: /** @type {number} */ (child.pid),
    first,
    /** @param {string} cmd @returns {Promise<any>} */
    ask: (cmd) => {
      const answer = nextLine()
      child.stdin?.write(`${cmd}\n`)
      return answer
    },
    stop: async () => {
      child.stdin?.end()
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000)
      await exited
      clearTimeout(timer)
    }
  }
}

/**
 * The echo backend, listening once this resolves.
 * @param {string} binary
 */
export const startNativeEcho = async (binary) => {
  const echo = start(binary, ["echo"])
  const { port } = await echo.first
  return { ...echo, port: /** @type {number} */ (port) }
}

/**
 * A generator with the interface of scenarios.mjs's Node.js one: `ask("start", load)` logs the sessions in and starts
 * the load, `ask("snapshot")` reads it, `end()` stops it. `flavour`: raw bytes (the raw modes), `framed` (a real
 * login into play and valid frames, for Portal's offline mode) or `encrypted` (an online-mode login first, for
 * client_only).
 * @param {string} binary @param {"raw" | "framed" | "encrypted"} [flavour]
 */
export const nativeGenerator = (binary, flavour = "raw") => {
  /** @type {ReturnType<typeof start> | undefined} */
  let running
  return {
    /** The generator process, once started (its CPU counts as the bench's own). */
    get pid() {
      if (running === undefined) throw new Error("gameload: not started")
      return running.pid
    },
    /** @param {string} cmd @param {Record<string, any>} [load] @returns {Promise<any>} */
    ask: async (cmd, load = {}) => {
      if (cmd === "start") {
        running = start(binary, ["game", String(load.port), String(load.host), String(load.count), String(GAME_PERIOD_MS), String(load.concurrency), flavour])
        const ready = await running.first
        if (ready.ready === 0) throw new Error(`no game session could log in: ${ready.firstError}`)
        return ready.ready
      }
      if (running === undefined) throw new Error(`gameload: ${cmd} before start`)
      return running.ask(cmd)
    },
    end: async () => running?.stop()
  }
}
