#!/usr/bin/env node
/**
 * A stand-in for a Minecraft server process, for the `local` provider's tests: a real minecraft-protocol server
 * on 127.0.0.1 that prints a vanilla-like start log, a ready line, and exits 0 when it reads `stop` on stdin.
 *
 *   node localServer.mjs [--port N] [--ready-after MS] [--never-ready] [--crash-after MS] [--ignore-stop]
 *                        [--stop-delay MS] [--long-line N]
 *
 * --port N          port to listen on (0 = any free port; the chosen one is printed)
 * --ready-after MS  wait this long after listening before printing the ready line
 * --never-ready     never print the ready line
 * --crash-after MS  exit with code 3 this long after starting
 * --ignore-stop     ignore `stop` (so the caller has to kill the process)
 * --stop-delay MS   take this long to shut down after `stop`
 * --long-line N     print one stdout line of N characters before the ready line
 */
import { createRequire } from "node:module"
import { createInterface } from "node:readline"

const require = createRequire(import.meta.url)
const mc = require("minecraft-protocol")

const args = process.argv.slice(2)
const option = (name) => {
  const index = args.indexOf(name)
  return index === -1 ? undefined : args[index + 1]
}
const flag = (name) => args.includes(name)
const number = (name, fallback) => {
  const value = option(name)
  return value === undefined ? fallback : Number(value)
}

const startedAt = Date.now()
const port = number("--port", 0)
const readyAfter = number("--ready-after", 0)
const crashAfter = number("--crash-after", undefined)
const stopDelay = number("--stop-delay", 0)
const longLine = number("--long-line", 0)

console.log(`[Server thread/INFO]: Starting minecraft server version test (pid ${process.pid})`)
console.log("[Server thread/INFO]: Loading properties")
console.error("[Server thread/WARN]: this is a test server printing to stderr")

const server = mc.createServer({ "online-mode": false, port, host: "127.0.0.1", version: false, motd: "local test server", keepAlive: false, hideErrors: true })
server.on("playerJoin", (client) => {
  console.log(`[Server thread/INFO]: ${client.username} joined the game`)
  client.write("keep_alive", { keepAliveId: client.protocolVersion >= 340 ? [0, 1] : 1 })
})
server.once("listening", () => {
  const actual = server.socketServer.address().port
  console.log(`[Server thread/INFO]: Starting Minecraft server on 127.0.0.1:${actual}`)
  if (longLine > 0) console.log("x".repeat(longLine))
  if (!flag("--never-ready")) {
    setTimeout(() => {
      const seconds = ((Date.now() - startedAt) / 1000).toFixed(3)
      console.log(`[Server thread/INFO]: Done (${seconds}s)! For help, type "help"`)
    }, readyAfter)
  }
})

if (crashAfter !== undefined) {
  setTimeout(() => {
    console.error("[Server thread/ERROR]: Encountered an unexpected exception (test crash)")
    process.exit(3)
  }, crashAfter)
}

const lines = createInterface({ input: process.stdin })
lines.on("line", (line) => {
  if (line.trim() !== "stop") return
  if (flag("--ignore-stop")) {
    console.log("[Server thread/INFO]: ignoring stop")
    return
  }
  console.log("[Server thread/INFO]: Stopping the server")
  setTimeout(() => {
    console.log("[Server thread/INFO]: Saving worlds")
    server.close()
    process.exit(0)
  }, stopDelay)
})
