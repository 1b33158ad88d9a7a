/**
 * The relay in both raw modes, passthrough and zero_copy (splice): large transfers both ways, either side closing
 * first, timeouts, shutdown mid-transfer, and no descriptors left behind. The client sends a real handshake and
 * Login Start (serialised by minecraft-protocol), then bulk data; the backend is a raw socket server.
 */
import { createHash, randomBytes } from "node:crypto"
import { readdirSync } from "node:fs"
import { createRequire } from "node:module"
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { spliceSupport } from "../../src/services/relay/zeroCopy.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { waitFor } from "../helpers/wait.js"

const mc = createRequire(import.meta.url)("minecraft-protocol")
const frame = (packet: Buffer) => Buffer.concat([Buffer.from([packet.length]), packet])
const LOGIN = Buffer.concat([
  frame(
    mc.createSerializer({ state: "handshaking", isServer: false, version: "1.20.4" }).createPacketBuffer({
      name: "set_protocol",
      params: { protocolVersion: 765, serverHost: "bulk.example.com", serverPort: 25565, nextState: 2 }
    })
  ),
  frame(
    mc.createSerializer({ state: "login", isServer: false, version: "1.20.4" }).createPacketBuffer({
      name: "login_start",
      params: { username: "Bulk", playerUUID: "00000000-0000-0000-0000-000000000001" }
    })
  )
])

const sha = (data: Buffer) => createHash("sha256").update(data).digest("hex")
const openFds = () => readdirSync("/proc/self/fd").length

interface BackendBehaviour {
  /** Called once the handshake and Login Start have arrived, with the rest of the stream. */
  onPlayer(socket: net.Socket, received: () => Buffer): void
}

const servers: Array<net.Server> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
})

const rawBackend = async (behaviour: BackendBehaviour) => {
  const sockets: Array<net.Socket> = []
  const server = net.createServer((socket) => {
    sockets.push(socket)
    socket.on("error", () => {})
    let buffer = Buffer.alloc(0)
    let started = false
    socket.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk])
      if (!started && buffer.length >= LOGIN.length) {
        started = true
        expect(buffer.subarray(0, LOGIN.length)).toEqual(LOGIN)
        behaviour.onPlayer(socket, () => buffer.subarray(LOGIN.length))
      }
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { port: (server.address() as net.AddressInfo).port, sockets }
}

const connectClient = (port: number) =>
  new Promise<net.Socket>((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => resolve(socket))
    socket.on("error", () => {})
  })

const collect = (socket: net.Socket): {
  data: () => Buffer
  error: () => Error | undefined
  ended: () => boolean
  closed: Promise<void>
} => {
  const chunks: Array<Buffer> = []
  let error: Error | undefined
  let ended = false
  socket.on("data", (chunk) => chunks.push(chunk))
  socket.on("error", (e) => (error = e))
  socket.on("end", () => (ended = true))
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()))
  return { data: () => Buffer.concat(chunks), error: () => error, ended: () => ended, closed }
}

const modes = ["passthrough", "zero_copy"] as const

describe.each(modes)("relay in %s mode", (mode) => {
  it("uses the mode it was asked for", () => {
    if (mode === "zero_copy" && process.platform === "linux") expect(spliceSupport().available).toBe(true)
  })

  const setup = async (behaviour: BackendBehaviour, extra = "") => {
    const backend = await rawBackend(behaviour)
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, {
      "bulk.toml": `domains = ["bulk.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]\nproxy_mode = "${mode}"\n${extra}`
    })
    const portal = await startPortal(dir.configFile)
    return { backend, portal }
  }

  it("moves 32 MiB each way at once, intact", async () => {
    const toBackend = randomBytes(32 << 20)
    const toClient = randomBytes(32 << 20)
    let resolveBackend: (data: Buffer) => void = () => {}
    const backendDone = new Promise<Buffer>((resolve) => (resolveBackend = resolve))
    const setupPromise = setup({
      onPlayer: (socket, received) => {
        socket.write(toClient)
        const check = () => {
          if (received().length >= toBackend.length) {
            socket.off("data", check)
            resolveBackend(received())
          }
        }
        socket.on("data", check)
        check()
      }
    })
    const { portal } = await setupPromise
    const client = await connectClient(portal.port)
    const seen = collect(client)
    client.write(LOGIN)
    client.write(toBackend)
    const atBackend = await backendDone
    await waitFor(() => seen.data().length >= toClient.length || undefined, { timeoutMs: 20_000, what: "data at the client" })
    expect(sha(atBackend.subarray(0, toBackend.length))).toBe(sha(toBackend))
    expect(sha(seen.data())).toBe(sha(toClient))
    client.destroy()
    await portal.waitForLog(/Bulk .* left bulk/)
    const left = portal.logs.find((line) => /Bulk .* left bulk/.test(line))!
    expect(left).toMatch(/in 32\.0 MiB, out 32\.0 MiB/)
  }, 30_000)

  it("backend closes first: its last message arrives whole, then the client sees the end (no reset)", async () => {
    const farewell = Buffer.concat([Buffer.from("bye:"), randomBytes(200_000)])
    const { portal } = await setup({
      onPlayer: (socket) => setTimeout(() => socket.end(farewell), 100)
    })
    const client = await connectClient(portal.port)
    const seen = collect(client)
    client.write(LOGIN)
    // The client keeps talking while the backend says goodbye, as a game client does.
    const chatter = setInterval(() => client.writable && client.write(randomBytes(1024)), 1)
    await seen.closed
    clearInterval(chatter)
    expect(seen.data()).toEqual(farewell)
    expect(seen.ended()).toBe(true)
    expect(seen.error()).toBeUndefined()
    await portal.waitForLog(/Bulk .* left bulk .*\(backend closed/)
  })

  it("client closes first: the backend gets everything, then the end", async () => {
    const last = randomBytes(300_000)
    let backendSaw: ReturnType<typeof collect> | undefined
    const { portal } = await setup({
      onPlayer: (socket, received) => {
        backendSaw = { ...collect(socket), data: () => received() }
      }
    })
    const client = await connectClient(portal.port)
    client.write(LOGIN)
    client.end(last)
    await waitFor(() => backendSaw, { what: "backend connection" })
    await backendSaw!.closed
    expect(sha(backendSaw!.data())).toBe(sha(last))
    expect(backendSaw!.error()).toBeUndefined()
    await portal.waitForLog(/Bulk .* left bulk .*\(client closed/)
  })

  it("a backend that goes silent is closed after [timeouts].read", async () => {
    const { portal } = await setup({ onPlayer: () => {} }, `[timeouts]\nread = "1s"`)
    const client = await connectClient(portal.port)
    const seen = collect(client)
    client.write(LOGIN)
    const started = Date.now()
    await seen.closed
    expect(Date.now() - started).toBeGreaterThanOrEqual(900)
    expect(Date.now() - started).toBeLessThan(4000)
    await portal.waitForLog(/left bulk .*\(read timeout/)
  })

  it("a backend that stops reading is closed after [timeouts].write", async () => {
    const { portal } = await setup(
      {
        onPlayer: (socket) => {
          socket.pause()
          // Keep the read timer quiet: the backend keeps talking but never reads.
          const ticker = setInterval(() => socket.writable && socket.write(Buffer.from([0])), 200)
          socket.on("close", () => clearInterval(ticker))
        }
      },
      `[timeouts]\nwrite = "1s"\nread = "30s"`
    )
    const client = await connectClient(portal.port)
    const seen = collect(client)
    client.write(LOGIN)
    const flood = setInterval(() => client.writable && client.write(Buffer.alloc(256 * 1024)), 5)
    await seen.closed
    clearInterval(flood)
    await portal.waitForLog(/left bulk .*\(write timeout/, 8000)
  })

  it("shutdown mid-transfer closes both sides, and no descriptor is left open", async () => {
    const before = openFds()
    const backendSockets: Array<net.Socket> = []
    const { portal } = await setup({
      onPlayer: (socket) => {
        backendSockets.push(socket)
        const pump = setInterval(() => socket.writable && socket.write(randomBytes(64 * 1024)), 2)
        socket.on("close", () => clearInterval(pump))
      }
    })
    const clients = await Promise.all(Array.from({ length: 5 }, () => connectClient(portal.port)))
    const seen = clients.map(collect)
    for (const client of clients) client.write(LOGIN)
    await waitFor(() => seen.every((s) => s.data().length > 100_000) || undefined, { what: "data flowing" })
    await portal.stop()
    await Promise.all(seen.map((s) => s.closed))
    await waitFor(() => backendSockets.every((socket) => socket.destroyed || socket.readableEnded) || undefined)
    for (const socket of backendSockets) socket.destroy()
    for (const client of clients) client.destroy()
    await waitFor(() => openFds() <= before + 2 || undefined, { what: `descriptors back to ${before} (now ${openFds()})` })
  })
})
