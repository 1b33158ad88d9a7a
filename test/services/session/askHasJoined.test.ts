/**
 * The session service's `hasJoined` call against a real HTTP server that never answers: the bound on the wait must
 * hold whatever the garbage collector does meanwhile (a timer that only a collected object refers to never fires).
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Effect, Either, Exit, Fiber } from "effect"
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

describe("askHasJoined, the request's life", () => {
  it("an interrupted login cancels its request: the fiber ends interrupted and the service sees the connection close", async () => {
    let closed = false
    let asked!: () => void
    const arrived = new Promise<void>((resolve) => (asked = resolve))
    const server = http.createServer((request) => {
      request.socket.on("close", () => (closed = true))
      asked()
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const fiber = Effect.runFork(askHasJoined(base, "Steve", "hash", 2_000))
    await arrived
    const exit = await Effect.runPromise(Fiber.interrupt(fiber))
    expect(Exit.isInterrupted(exit)).toBe(true)
    for (let i = 0; i < 100 && !closed; i++) await new Promise((resolve) => setTimeout(resolve, 10))
    expect(closed).toBe(true)
  })

  it("an answer over 64 KiB, or no service at all, is an unavailable service with the reason", async () => {
    const server = http.createServer((_request, response) => response.writeHead(200).end("x".repeat(70_000)))
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const big = await Effect.runPromise(Effect.either(askHasJoined(base, "Steve", "hash", 2_000)))
    expect(Either.isLeft(big) && big.left.reason).toMatch(/failed: an answer of more than 65536 bytes/)
    await new Promise((resolve) => server.close(resolve))
    const gone = await Effect.runPromise(Effect.either(askHasJoined(base, "Steve", "hash", 2_000)))
    expect(Either.isLeft(gone) && gone.left.reason).toMatch(/failed: .*ECONNREFUSED/)
  })

  it("a profile comes back decoded, with its properties", async () => {
    const profile = { id: "0123456789abcdef0123456789abcdef", name: "Steve", properties: [{ name: "textures", value: "dGV4dHVyZXM=", signature: "c2ln" }] }
    const server = http.createServer((_request, response) => response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(profile)))
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    for (let i = 0; i < 3; i++) {
      expect(await Effect.runPromise(askHasJoined(base, "Steve", "hash", 2_000))).toEqual({
        _tag: "Joined",
        profile: { uuid: "01234567-89ab-cdef-0123-456789abcdef", name: "Steve", properties: profile.properties }
      })
    }
  })

  it("a property whose signature is null is an unsigned property, as Mojang's authlib reads it", async () => {
    const text = JSON.stringify({ id: "0123456789abcdef0123456789abcdef", name: "Steve", properties: [{ name: "textures", value: "dGV4dHVyZXM=", signature: null }] })
    const server = http.createServer((_request, response) => response.writeHead(200, { "content-type": "application/json" }).end(text))
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    expect(await Effect.runPromise(askHasJoined(base, "Steve", "hash", 2_000))).toEqual({
      _tag: "Joined",
      profile: { uuid: "01234567-89ab-cdef-0123-456789abcdef", name: "Steve", properties: [{ name: "textures", value: "dGV4dHVyZXM=" }] }
    })
  })
})
