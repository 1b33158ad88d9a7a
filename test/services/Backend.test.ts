/** Backend.dialFor over an in-memory connector: a watch that says the player left ends the dial and gives back its count. */
import { Effect, Either, Layer, Schema } from "effect"
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { decodeServerText } from "../../src/schema/decode.js"
import { GlobalConfig } from "../../src/schema/GlobalConfig.js"
import { Backend, type PlayerWatch } from "../../src/services/Backend.js"
import { Balancer } from "../../src/services/Balancer.js"

const server = Either.getOrThrow(decodeServerText("s.toml", "s.toml", `addresses = ["a:1", "b:1"]\nbalance = "least_conn"`))
const global = Schema.decodeUnknownSync(GlobalConfig)({ connect_timeout: "10s" })

/** A connector whose connects never answer; the sockets it made, to see them destroyed. */
const hanging = () => {
  const made: Array<net.Socket> = []
  const layer = Backend.layerTest(() => {
    const socket = new net.Socket()
    made.push(socket)
    return socket
  })
  return { made, layer: Layer.provideMerge(layer, Balancer.Default) }
}

const activeCounts = Effect.flatMap(Balancer, (balancer) => balancer.status(server)).pipe(Effect.map((addresses) => addresses.map((a) => a.active)))

describe("Backend.dialFor", () => {
  it("ends when the watch says the player left: the attempt's socket destroyed, its least_conn count given back", async () => {
    const { made, layer } = hanging()
    let left: ((why: string) => void) | undefined
    const watch: PlayerWatch = (onLeft) => {
      left = onLeft
      return () => {}
    }
    const result = await Effect.gen(function* () {
      const backend = yield* Backend
      const fiber = yield* Effect.fork(Effect.either(backend.dialFor(watch, server, global)))
      yield* Effect.sleep("20 millis")
      const during = yield* activeCounts
      left!("connection closed during the backend's answer")
      const outcome = yield* fiber.await
      return { during, outcome, after: yield* activeCounts }
    }).pipe(Effect.provide(layer), Effect.runPromise)
    expect(result.during).toEqual([1, 0])
    expect(result.after).toEqual([0, 0])
    expect(made).toHaveLength(1)
    expect(made[0]!.destroyed).toBe(true)
    const exit = result.outcome
    expect(exit._tag === "Success" && Either.isLeft(exit.value) ? exit.value.left : undefined).toMatchObject({
      _tag: "DialAbandoned",
      why: "connection closed during the backend's answer"
    })
  })

  it("a player already gone is not dialled for at all", async () => {
    const { made, layer } = hanging()
    const goneAlready: PlayerWatch = (onLeft) => {
      onLeft("connection closed during the backend's answer")
      return () => {}
    }
    const outcome = await Effect.flatMap(Backend, (backend) => Effect.either(backend.dialFor(goneAlready, server, global))).pipe(
      Effect.provide(layer),
      Effect.runPromise
    )
    expect(Either.isLeft(outcome) && outcome.left._tag).toBe("DialAbandoned")
    expect(made).toHaveLength(0)
    expect(await Effect.runPromise(activeCounts.pipe(Effect.provide(layer)))).toEqual([0, 0])
  })

  it("stops watching once connected: a later leave changes nothing", async () => {
    let cancelled = false
    const connecting = Layer.provideMerge(
      Backend.layerTest(() => {
        const socket = new net.Socket()
        setImmediate(() => socket.emit("connect"))
        return socket
      }),
      Balancer.Default
    )
    const watch: PlayerWatch = () => () => (cancelled = true)
    const outcome = await Effect.flatMap(Backend, (backend) => Effect.either(backend.dialFor(watch, server, global))).pipe(
      Effect.provide(connecting),
      Effect.runPromise
    )
    expect(Either.isRight(outcome)).toBe(true)
    expect(cancelled).toBe(true)
    if (Either.isRight(outcome)) outcome.right.release()
  })
})
