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
  onPlayer(socket: net.Socket, received: () => Buffer, receivedLength: () => number): void
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
    // The chunks are joined when asked for, once per new chunk at most: joining at every chunk copied the whole
    // stream each time, quadratic in its length (seconds for 32 MiB in small reads).
    const chunks: Array<Buffer> = []
    let joined = Buffer.alloc(0)
    let started = false
    const buffer = () => {
      if (chunks.length > 0) joined = Buffer.concat([joined, ...chunks.splice(0)])
      return joined
    }
    let length = 0
    socket.on("data", (chunk) => {
      chunks.push(chunk)
      length += chunk.length
      if (!started && length >= LOGIN.length) {
        started = true
        expect(buffer().subarray(0, LOGIN.length)).toEqual(LOGIN)
        behaviour.onPlayer(socket, () => buffer().subarray(LOGIN.length), () => length - LOGIN.length)
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
  let joined = Buffer.alloc(0)
  let error: Error | undefined
  let ended = false
  socket.on("data", (chunk) => chunks.push(chunk))
  socket.on("error", (e) => (error = e))
  socket.on("end", () => (ended = true))
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()))
  // Joined once per new chunk at most, as the backend's stream above.
  const data = () => {
    if (chunks.length > 0) joined = Buffer.concat([joined, ...chunks.splice(0)])
    return joined
  }
  return { data, error: () => error, ended: () => ended, closed }
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
      onPlayer: (socket, received, receivedLength) => {
        socket.write(toClient)
        const check = () => {
          if (receivedLength() >= toBackend.length) {
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

  it("many sessions with small and large writes mixed, and clients that keep pausing: every byte in order", async () => {
    // Sizes from a single byte to several reads' worth, and runs of small ones, so directions go from quiet to busy
    // and back while other sessions read in between. Both ends read nothing for their first 300 ms, so Portal's
    // writes to them back up.
    const smallRun = Array.from({ length: 24 }, (_, i) => 1 + ((i * 37) % 900))
    const sizes = [17_000, 3, 300_000, 65_536, ...smallRun, 3_000_000, 40_000, 200_000, 16_384, 2_000_000, ...smallRun]
    const stream = (seed: number) => {
      const chunks = sizes.map((size, index) => randomBytes(size + ((index + seed) % 7)))
      return { chunks, all: Buffer.concat(chunks) }
    }
    const sessions = 8
    const toClient = Array.from({ length: sessions }, (_, i) => stream(i))
    const toBackend = Array.from({ length: sessions }, (_, i) => stream(i + 5))
    const writeSpread = (socket: net.Socket, chunks: ReadonlyArray<Buffer>) => {
      let next = 0
      const tick = setInterval(() => {
        if (next >= chunks.length || !socket.writable) return clearInterval(tick)
        socket.write(chunks[next++]!)
      }, 3)
    }
    const atBackend = new Map<number, () => Buffer>()
    let players = 0
    const { portal } = await setup({
      onPlayer: (socket, received) => {
        // Clients connect one after another, each once the previous one reached the backend.
        const index = players++
        atBackend.set(index, received)
        socket.pause()
        setTimeout(() => socket.resume(), 300)
        writeSpread(socket, toClient[index]!.chunks)
      }
    })
    const clients = []
    for (let i = 0; i < sessions; i++) {
      const client = await connectClient(portal.port)
      const seen = collect(client)
      client.pause()
      const stopAndGo = setTimeout(() => client.resume(), 300)
      client.write(LOGIN)
      await waitFor(() => atBackend.has(i) || undefined, { what: `backend connection ${i}` })
      writeSpread(client, toBackend[i]!.chunks)
      clients.push({ client, seen, stopAndGo })
    }
    for (let i = 0; i < sessions; i++) {
      const { seen } = clients[i]!
      await waitFor(() => seen.data().length >= toClient[i]!.all.length || undefined, { timeoutMs: 20_000, what: `data at client ${i}` })
      await waitFor(() => atBackend.get(i)!().length >= toBackend[i]!.all.length || undefined, { timeoutMs: 20_000, what: `data at backend ${i}` })
      expect(sha(seen.data())).toBe(sha(toClient[i]!.all))
      expect(sha(atBackend.get(i)!())).toBe(sha(toBackend[i]!.all))
    }
    for (const { client, stopAndGo } of clients) {
      clearTimeout(stopAndGo)
      client.destroy()
    }
  }, 40_000)

  it("many sessions trickling small packets to clients that stop reading for a while: every byte in order", async () => {
    // Game-sized packets only, far more than the kernel buffers hold while the clients do not read.
    const sessions = 6
    const packets = 20_000
    const streams = Array.from({ length: sessions }, () => Array.from({ length: packets }, (_, i) => randomBytes(200 + (i % 9) * 100)))
    let players = 0
    const { portal } = await setup({
      onPlayer: (socket) => {
        const chunks = streams[players++]!
        let next = 0
        const tick = setInterval(() => {
          for (let burst = 0; burst < 40 && next < chunks.length && socket.writable; burst++) socket.write(chunks[next++]!)
          if (next >= chunks.length || !socket.writable) clearInterval(tick)
        }, 1)
      }
    })
    const clients = []
    for (let i = 0; i < sessions; i++) {
      const client = await connectClient(portal.port)
      const seen = collect(client)
      client.pause()
      client.write(LOGIN)
      await waitFor(() => players > i || undefined, { what: `backend connection ${i}` })
      clients.push({ client, seen })
    }
    await new Promise((resolve) => setTimeout(resolve, 700))
    for (const { client } of clients) client.resume()
    for (let i = 0; i < sessions; i++) {
      const expected = Buffer.concat(streams[i]!)
      const { seen } = clients[i]!
      await waitFor(() => seen.data().length >= expected.length || undefined, { timeoutMs: 20_000, what: `data at client ${i}` })
      expect(sha(seen.data())).toBe(sha(expected))
    }
    for (const { client } of clients) client.destroy()
  }, 40_000)

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

  it("backend closes first: a client still sending after the end is drained, not reset, until it closes too", async () => {
    const { portal } = await setup({ onPlayer: (socket) => socket.end("bye") })
    const client = net.connect({ port: portal.port, host: "127.0.0.1", allowHalfOpen: true })
    const seen = collect(client)
    client.write(LOGIN)
    await waitFor(() => seen.ended() || undefined, { what: "the end from Portal" })
    // As a client that has not noticed the end yet: it goes on sending for a moment, well within the linger.
    for (let i = 0; i < 10 && seen.error() === undefined; i++) {
      client.write(randomBytes(4096))
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    client.end()
    await seen.closed
    expect(seen.data().toString()).toBe("bye")
    expect(seen.error()).toBeUndefined()
    await portal.waitForLog(/Bulk .* left bulk .*\(backend closed;/)
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

  it("a side that resets its connection is logged as that side closing, with the code", async () => {
    const backends: Array<net.Socket> = []
    const { portal } = await setup({ onPlayer: (socket) => backends.push(socket) })
    const resetting = await connectClient(portal.port)
    resetting.write(LOGIN)
    await waitFor(() => backends[0], { what: "first backend connection" })
    resetting.resetAndDestroy()
    await portal.waitForLog(/Bulk .* left bulk .*\(client closed: ECONNRESET/)
    const staying = await connectClient(portal.port)
    const seen = collect(staying)
    staying.write(LOGIN)
    await waitFor(() => backends[1], { what: "second backend connection" })
    backends[1]!.resetAndDestroy()
    await seen.closed
    await portal.waitForLog(/Bulk .* left bulk .*\(backend closed: ECONNRESET/)
  })

  it("a timeout during the drain after a clean end leaves the end as it was: the side that ended is named", async () => {
    // The backend keeps its side open after the player's end, and has sent nothing for longer than `read` by the
    // time the 2 s drain is over.
    const backends: Array<net.Socket> = []
    const { portal } = await setup({ onPlayer: (socket) => backends.push(Object.assign(socket, { allowHalfOpen: true })) }, `[timeouts]\nread = "1s"`)
    const client = await connectClient(portal.port)
    client.write(LOGIN)
    await waitFor(() => backends[0], { what: "the backend connection" })
    await new Promise((resolve) => setTimeout(resolve, 500))
    client.end()
    await portal.waitForLog(/Bulk .* left bulk /, 8000)
    for (const socket of backends) socket.destroy()
    expect(portal.logs.find((line) => /Bulk .* left bulk /.test(line))).toMatch(/\(client closed/)
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

  /** A backend with plenty to say, as fast as it is taken. */
  const talkative: BackendBehaviour = {
    onPlayer: (socket) => {
      const pump = setInterval(() => socket.writable && !socket.writableNeedDrain && socket.write(randomBytes(64 * 1024)), 2)
      socket.on("close", () => clearInterval(pump))
      socket.on("error", () => {})
    }
  }

  it("a player that stops reading is closed after [timeouts].write as a player timeout, not blamed on the backend", async () => {
    const { portal } = await setup(talkative, `[timeouts]\nwrite = "2s"\nread = "1s"`)
    const client = await connectClient(portal.port)
    client.write(LOGIN)
    // The player's client takes nothing: once the buffers between are full, Portal stops reading the backend.
    client.pause()
    const line = await portal.waitForLog(/Bulk .* left bulk /, 10_000)
    expect(line).toMatch(/\(player timeout/)
    client.destroy()
  })

  it("a slow player that keeps reading is not timed out, however long one large write to it takes", async () => {
    const { portal } = await setup(talkative, `[timeouts]\nwrite = "2s"\nread = "1s"`)
    const client = await connectClient(portal.port)
    client.write(LOGIN)
    // 8 KiB every 100 ms: a 256 KiB write to this player takes over 3 s, longer than the write timeout.
    client.pause()
    let received = 0
    const reader = setInterval(() => {
      const chunk = client.read(8 * 1024) ?? client.read()
      if (chunk !== null) received += chunk.length
    }, 100)
    try {
      await new Promise((resolve) => setTimeout(resolve, 7_000))
      expect(portal.logs.filter((line) => / left bulk /.test(line))).toEqual([])
      const before = received
      await new Promise((resolve) => setTimeout(resolve, 500))
      expect(received).toBeGreaterThan(before)
    } finally {
      clearInterval(reader)
      client.destroy()
    }
  }, 15_000)

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
