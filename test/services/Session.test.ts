/**
 * The connection path without sockets or files: Session on swapped layers (a static configuration, bans in memory,
 * an in-memory backend dialer), driven through in-memory connections. This is how a phase can be tried alone.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as NodeCommandExecutor from "@effect/platform-node/NodeCommandExecutor"
import { Effect, Either, Layer, Logger, LogLevel, ManagedRuntime, Schema } from "effect"
import type * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { readFrame } from "../../src/protocol/frame.js"
import { encodeHandshake, NEXT_STATE_LOGIN, NEXT_STATE_STATUS } from "../../src/protocol/handshake.js"
import { PacketReader } from "../../src/protocol/PacketReader.js"
import { PacketWriter } from "../../src/protocol/PacketWriter.js"
import { readStatusResponse, STATUS_REQUEST } from "../../src/protocol/status.js"
import { decodeServerText } from "../../src/schema/decode.js"
import { GlobalConfig } from "../../src/schema/GlobalConfig.js"
import { makeSessionLayer } from "../../src/layers/Proxy.js"
import { Backend } from "../../src/services/Backend.js"
import { BanStore } from "../../src/services/BanStore.js"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"
import { Session } from "../../src/services/Session.js"
import { SharedMemory } from "../../src/services/SharedMemory.js"
import { memoryConnection } from "../helpers/memorySocket.js"
import { waitFor } from "../helpers/wait.js"

const server = (file: string, text: string) => Either.getOrThrow(decodeServerText(`servers/${file}`, file, text))

const snapshot = {
  configFile: "proxy.toml",
  global: Schema.decodeUnknownSync(GlobalConfig)({}),
  servers: new Map([["lobby", server("lobby.toml", `domains = ["lobby.example.com"]\naddresses = ["10.0.0.5:25565"]`)]]),
  revision: 1
}

/** What the in-memory backend received, per connection, and the ends it holds to answer on. */
const dialed: Array<{ readonly address: string; readonly end: net.Socket; received: Buffer }> = []

/** An in-memory dialer: every address "answers", and its end of the connection is kept for the test. */
const memoryBackend = Backend.layerTest((address) => {
  const { client, server: end } = memoryConnection("10.0.0.1", 40_000, address.host, address.port)
  const record = { address: `${address.host}:${address.port}`, end, received: Buffer.alloc(0) }
  end.on("data", (chunk: Buffer) => (record.received = Buffer.concat([record.received, chunk])))
  // A server closes its side when the player's side ends.
  end.on("end", () => end.end())
  dialed.push(record)
  setImmediate(() => client.emit("connect"))
  return client
})

const layer = makeSessionLayer({
  bans: BanStore.layerMemory({
    bans: [{ target: { type: "username", value: "griefer" }, reason: "griefing", source: "test" }]
  }),
  backend: memoryBackend
}).pipe(
  Layer.provide(SharedMemory.slotting.pipe(Layer.provideMerge(SharedMemory.layer(1)), Layer.provideMerge(ConfigStore.layerStatic(snapshot)))),
  Layer.provide(Layer.mergeAll(FileSystem.layerNoop({}), FetchHttpClient.layer, NodeCommandExecutor.layer.pipe(Layer.provide(FileSystem.layerNoop({}))))),
  Layer.provide(Logger.minimumLogLevel(LogLevel.None))
)

const runtimes: Array<{ readonly dispose: () => Promise<void> }> = []
afterEach(async () => {
  dialed.splice(0)
  for (const runtime of runtimes.splice(0)) await runtime.dispose()
})

const start = () => {
  const runtime = ManagedRuntime.make(layer)
  runtimes.push(runtime)
  return runtime
}

/** A connection handled by Session; the test holds the player's end. */
const connect = (runtime: ReturnType<typeof start>, id: number) => {
  const { client, server: socket } = memoryConnection()
  const received: Array<Buffer> = []
  let ended = false
  client.on("data", (chunk: Buffer) => received.push(chunk))
  client.on("end", () => (ended = true))
  void runtime.runPromise(
    Effect.map(Session, (session) =>
      session.handle.accept({ id, socket }, (effect) => {
        runtime.runFork(effect)
      })
    )
  )
  return { client, bytes: () => Buffer.concat(received), ended: () => ended }
}

const loginStart = (name: string) => new PacketWriter().string(name).frame(0x00)
const handshake = (host: string, nextState: number) => encodeHandshake({ protocolVersion: 47, address: host, port: 25565, nextState })

/** The JSON text of the first frame (a login Disconnect or a status response). */
const firstString = (bytes: Buffer): string => {
  const frame = readFrame(bytes, 0, 1 << 20)
  if (frame._tag !== "Frame") throw new Error(`no frame in ${bytes.toString("hex")}`)
  return new PacketReader(bytes.subarray(frame.bodyStart, frame.end)).string(32767, "text")
}

describe("Session on swapped layers", () => {
  it("relays a login to the backend through the in-memory dialer, and lists the player until they leave", async () => {
    const runtime = start()
    const player = connect(runtime, 1)
    const hello = Buffer.concat([handshake("lobby.example.com", NEXT_STATE_LOGIN), loginStart("Alex")])
    player.client.write(hello)
    const backend = await waitFor(() => (dialed[0]?.received.length === hello.length ? dialed[0] : undefined), { what: "the replayed login" })
    expect(backend.address).toBe("10.0.0.5:25565")
    // Nothing in the handshake changes (no rewrite, no forwarding): the backend sees the player's bytes as they were.
    expect(backend.received.equals(hello)).toBe(true)
    const players = await runtime.runPromise(Effect.flatMap(PlayerRegistry, (registry) => registry.list))
    expect(players).toMatchObject([{ name: "Alex", serverId: "lobby", clientAddress: "198.51.100.7", backendAddress: "10.0.0.5:25565" }])
    // Bytes flow back to the player through the relay.
    backend.end.write(Buffer.from("from the backend"))
    await waitFor(() => player.bytes().toString() === "from the backend", { what: "the backend's bytes at the player" })
    player.client.end()
    await waitFor(async () => (await runtime.runPromise(Effect.flatMap(PlayerRegistry, (registry) => registry.total))) === 0, {
      what: "the player to leave the registry"
    })
  })

  it("refuses a banned player with the reason, and never dials", async () => {
    const runtime = start()
    const player = connect(runtime, 2)
    player.client.write(Buffer.concat([handshake("lobby.example.com", NEXT_STATE_LOGIN), loginStart("Griefer")]))
    await waitFor(() => player.ended(), { what: "the connection to close" })
    expect(JSON.parse(firstString(player.bytes())).text).toMatch(/banned[\s\S]*griefing/)
    expect(dialed).toEqual([])
  })

  it("answers a ping for an unknown domain with the default MOTD", async () => {
    const runtime = start()
    const player = connect(runtime, 3)
    player.client.write(Buffer.concat([handshake("nowhere.example.com", NEXT_STATE_STATUS), STATUS_REQUEST]))
    await waitFor(() => readStatusResponse(player.bytes())._tag === "Response", { what: "the status answer" })
    const answer = readStatusResponse(player.bytes())
    expect(answer._tag === "Response" ? JSON.parse(answer.json).description : undefined).toMatch(/No server answers/)
    expect(dialed).toEqual([])
  })
})
