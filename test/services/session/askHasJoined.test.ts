/**
 * The session service's `hasJoined` call against a real HTTP server that never answers: the bound on the wait must
 * hold whatever the garbage collector does meanwhile (a timer that only a collected object refers to never fires).
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Effect, Either } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { askHasJoined } from "../../../src/services/session/authentication.js"

setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

const servers: Array<http.Server> = []
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

/** An HTTP server that takes every request and never answers it. */
const silentServer = async (): Promise<string> => {
  const server = http.createServer(() => {})
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

describe("askHasJoined", () => {
  it("gives up on a session service that never answers after the timeout, even with full collections meanwhile", { timeout: 10_000 }, async () => {
    const base = await silentServer()
    const collecting = setInterval(gc, 20)
    try {
      const started = Date.now()
      const results = await Promise.all(Array.from({ length: 4 }, () => Effect.runPromise(Effect.either(askHasJoined(base, "Steve", "hash", 300)))))
      for (const result of results) {
        expect(Either.isLeft(result) && result.left.reason).toMatch(/at http:\/\/127\.0\.0\.1:\d+ failed: no answer in time/)
      }
      expect(Date.now() - started).toBeLessThan(5_000)
    } finally {
      clearInterval(collecting)
    }
  })

  it("a service that answers 204 is a player who did not join; 500 is an unreachable service", async () => {
    let status = 204
    const server = http.createServer((_request, response) => response.writeHead(status).end())
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    expect(await Effect.runPromise(askHasJoined(base, "Steve", "hash", 2_000))).toEqual({ _tag: "NotJoined" })
    status = 500
    const failed = await Effect.runPromise(Effect.either(askHasJoined(base, "Steve", "hash", 2_000)))
    expect(Either.isLeft(failed) && failed.left.reason).toMatch(/answered HTTP 500/)
  })
})
