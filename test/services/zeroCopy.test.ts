/** zero_copy relay on loopback: a backend server, a proxy that hands each connection to startSplice, and clients. */
import { execFileSync, spawn } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import { once } from "node:events"
import { mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net"
import { Worker } from "node:worker_threads"
import { afterEach, describe, expect, it } from "vitest"
import { loadNativeAddon, type NativeAddon } from "../../src/services/native/addon.js"
import { tcpFdOf } from "../../src/services/native/tcpHandle.js"
import { counterAt, SpliceCounter, type SpliceSession, type SpliceStats, spliceSupport, startSplice } from "../../src/services/relay/zeroCopy.js"
import { waitFor } from "../helpers/wait.js"

const MiB = 1024 * 1024
const support = spliceSupport()

it("is available on Linux", () => {
  if (process.platform === "linux") expect(support).toEqual({ available: true })
  else expect(support.available).toBe(false)
})

/** Values promised by one event handler and awaited by another, by key. */
class Rendezvous<K, V> {
  private readonly waiting = new Map<K, { promise: Promise<V>; resolve: (value: V) => void }>()
  private entry(key: K) {
    let entry = this.waiting.get(key)
    if (entry === undefined) {
      let resolve: (value: V) => void = () => {}
      const promise = new Promise<V>((r) => (resolve = r))
      entry = { promise, resolve }
      this.waiting.set(key, entry)
    }
    return entry
  }
  put(key: K, value: V) {
    this.entry(key).resolve(value)
  }
  take(key: K): Promise<V> {
    const { promise } = this.entry(key)
    return promise.finally(() => this.waiting.delete(key))
  }
}

interface Relayed {
  /** The test's client connection to the proxy. */
  readonly client: Socket
  /** The backend server's end of the proxy's backend connection. */
  readonly backend: Socket
  /** The proxy's two sockets, owned by the session. */
  readonly proxySockets: ReadonlyArray<Socket>
  readonly session: SpliceSession
}

interface RelayOptions {
  /** Written by the proxy to the backend before the handoff, like a replayed handshake. */
  readonly replay?: Buffer
  /** Written by the backend as soon as it accepts. */
  readonly greeting?: Buffer
  /** Runs in the proxy between connecting to the backend and startSplice. */
  readonly beforeSplice?: (fromClient: Socket, toBackend: Socket) => Promise<void>
}

const servers: Array<Server> = []
const sockets: Array<Socket> = []
/** Test-side sockets see resets on purpose; the assertions look at what arrived and at the session. */
const track = (...created: Array<Socket>) => {
  for (const socket of created) socket.on("error", () => {})
  sockets.push(...created)
}
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy()
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))))
})

const listen = async (server: Server): Promise<number> => {
  servers.push(server)
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  return (server.address() as AddressInfo).port
}

/** A backend and a proxy; `connect()` opens one client connection and returns once it is spliced. */
const makeRelay = async (options: RelayOptions = {}) => {
  const backends = new Rendezvous<number, Socket>()
  const proxied = new Rendezvous<number, { session: SpliceSession; proxySockets: Array<Socket>; backendPort: number }>()
  const backendPort = await listen(
    createServer((socket) => {
      track(socket)
      if (options.greeting !== undefined) socket.write(options.greeting)
      backends.put(socket.remotePort!, socket)
    })
  )
  const proxyPort = await listen(
    createServer(async (fromClient) => {
      const toBackend = connect(backendPort, "127.0.0.1")
      sockets.push(fromClient, toBackend)
      await once(toBackend, "connect")
      if (options.replay !== undefined) toBackend.write(options.replay)
      await options.beforeSplice?.(fromClient, toBackend)
      const session = startSplice(fromClient, toBackend)
      const proxySockets = [fromClient, toBackend]
      proxied.put(fromClient.remotePort!, { session, proxySockets, backendPort: toBackend.localPort! })
    })
  )
  const connectClient = async (firstBytes?: Buffer, { allowHalfOpen = false } = {}): Promise<Relayed> => {
    const client = connect({ port: proxyPort, host: "127.0.0.1", allowHalfOpen })
    track(client)
    if (firstBytes !== undefined) client.write(firstBytes)
    await once(client, "connect")
    const { session, proxySockets, backendPort: port } = await proxied.take(client.localPort!)
    return { client, backend: await backends.take(port), proxySockets, session }
  }
  return { connect: connectClient }
}

/** Everything a socket receives until its peer ends or it closes. */
const collect = (socket: Socket): Promise<Buffer> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    socket.once("end", () => resolve(Buffer.concat(chunks)))
    socket.once("close", () => resolve(Buffer.concat(chunks)))
  })

/** SHA-256 of the first `length` bytes a socket receives. */
const digestOf = (socket: Socket, length: number): Promise<string> =>
  new Promise((resolve, reject) => {
    const hash = createHash("sha256")
    let received = 0
    socket.on("data", (chunk: Buffer) => {
      hash.update(chunk)
      received += chunk.length
      if (received === length) resolve(hash.digest("hex"))
      if (received > length) reject(new Error(`received ${received} bytes, expected ${length}`))
    })
    socket.once("close", () => reject(new Error(`closed after ${received} of ${length} bytes`)))
  })

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex")

/** Writes chunks until stopped or the socket goes away, respecting backpressure. */
const stream = (socket: Socket) => {
  let running = true
  const chunk = randomBytes(64 * 1024)
  const pump = () => {
    while (running && !socket.destroyed && socket.write(chunk));
  }
  socket.on("drain", pump)
  pump()
  return () => (running = false)
}

/** Writes 1 KiB every millisecond, like a game client, until stopped, closed, or ended (unless half-open). */
const chatter = (socket: Socket) => {
  const kib = randomBytes(1024)
  const timer = setInterval(() => {
    if (!socket.writableEnded && !socket.destroyed) socket.write(kib)
  }, 1)
  const stop = () => clearInterval(timer)
  if (!socket.allowHalfOpen) socket.once("end", stop)
  socket.once("close", stop)
  return stop
}

/** What a socket receives, and how it ended: a clean end of stream or an error. */
const ending = (socket: Socket) =>
  new Promise<{ data: Buffer; ended: boolean; error?: string }>((resolve) => {
    const chunks: Array<Buffer> = []
    let ended = false
    let error: string | undefined
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    socket.on("error", (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message))
    socket.once("end", () => (ended = true))
    socket.once("close", () =>
      resolve({ data: Buffer.concat(chunks), ended, ...(error === undefined ? {} : { error }) })
    )
  })

/** Resolves on 'close' whatever the error before it (events.once would reject on 'error'). */
const closed = (socket: Socket) =>
  new Promise<void>((resolve) => (socket.closed ? resolve() : socket.once("close", () => resolve())))

const openFds = () => readdirSync("/proc/self/fd").length

/** This process's open fds, and the pipe ends among them. */
const fdKinds = () => {
  let total = 0
  let pipes = 0
  for (const fd of readdirSync("/proc/self/fd")) {
    let target: string
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`)
    } catch {
      continue // the directory listing's own fd, closed by now
    }
    total++
    if (target.startsWith("pipe:")) pipes++
  }
  return { total, pipes }
}

const addon = (): NativeAddon => {
  const loaded = loadNativeAddon()
  if (!("addon" in loaded)) throw new Error(loaded.reason)
  return loaded.addon
}

/**
 * A child that relays with pipes unavailable: its soft open-files limit is lowered, then every free fd taken, so
 * pipe2() fails with EMFILE while the test process keeps all of its own. Prints one JSON line of observations.
 */
const starvedChild = (root: string) => `
import { execFileSync } from "node:child_process"
import { once } from "node:events"
import { closeSync, openSync, readdirSync, readFileSync } from "node:fs"
import { connect, createServer } from "node:net"
import { loadNativeAddon } from ${JSON.stringify(join(root, "src/services/native/addon.ts"))}
import { startSplice } from ${JSON.stringify(join(root, "src/services/relay/zeroCopy.ts"))}

const native = loadNativeAddon().addon
const pool = () => native.pipePoolDiagnostic()
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const waitFor = async (probe, what, timeoutMs = 5000) => {
  for (const deadline = Date.now() + timeoutMs; !probe(); await sleep(10))
    if (Date.now() > deadline) throw new Error("timed out waiting for " + what)
}

const received = new Map()
const backends = new Map()
const backendServer = createServer((socket) => {
  received.set(socket.remotePort, 0)
  backends.set(socket.remotePort, socket)
  socket.on("data", (chunk) => received.set(socket.remotePort, received.get(socket.remotePort) + chunk.length))
  socket.on("error", () => {})
})
backendServer.listen(0, "127.0.0.1")
await once(backendServer, "listening")
const sessions = new Map()
const proxy = createServer(async (fromClient) => {
  const toBackend = connect(backendServer.address().port, "127.0.0.1")
  await once(toBackend, "connect")
  sessions.set(fromClient.remotePort, { session: startSplice(fromClient, toBackend), backendPort: toBackend.localPort })
})
proxy.listen(0, "127.0.0.1")
await once(proxy, "listening")
const open = async () => {
  const client = connect(proxy.address().port, "127.0.0.1")
  client.on("error", () => {})
  await once(client, "connect")
  await waitFor(() => sessions.has(client.localPort), "the session")
  const { session, backendPort } = sessions.get(client.localPort)
  await waitFor(() => backends.has(backendPort), "the backend connection")
  return { client, session, backend: backends.get(backendPort), received: () => received.get(backendPort) }
}
const stallers = []
for (let i = 0; i < 6; i++) stallers.push(await open())
const [waiter, ender, cancelled] = [await open(), await open(), await open()]

// From here on no fd can be opened: no more connections, imports or file reads.
const hard = /^Max open files\\s+\\S+\\s+(\\S+)/m.exec(readFileSync("/proc/self/limits", "utf8"))[1]
execFileSync("prlimit", ["--pid", String(process.pid), "--nofile=" + (readdirSync("/proc/self/fd").length + 64) + ":" + hard])
const spare = []
const exhaust = () => {
  for (;;) {
    try {
      spare.push(openSync("/dev/null", "r"))
    } catch {
      return
    }
  }
}
const release = () => spare.splice(0).forEach((fd) => closeSync(fd))
// A backend that does not read keeps a pipe lent for good once every buffer on the way is full: the client still
// holds bytes Node could not write. Stalls sessions until the pool is empty.
const lots = Buffer.alloc(128 * 1024 * 1024)
const stalled = ({ client, session }) => client.writableLength > 0 && session.stats().pendingToBackend > 0
const stall = async () => {
  while (pool().idle > 0) {
    const staller = stallers.find((candidate) => !candidate.stalled)
    if (staller === undefined) throw new Error("too few sessions to empty the pool")
    staller.stalled = true
    staller.backend.pause()
    staller.client.write(lots)
    // Stalled for 300 ms in a row: the buffers are full, not just filling.
    let since = Date.now()
    await waitFor(() => (stalled(staller) ? Date.now() - since >= 300 : ((since = Date.now()), false)), "a stalled pipe", 10000)
  }
}

exhaust()
await stall()
exhaust()
let failures = pool().failures
waiter.client.write("hello")
cancelled.client.write("lost")
const cpuBefore = process.cpuUsage()
await sleep(500)
const cpu = process.cpuUsage(cpuBefore)
const starved = {
  waiterReceived: waiter.received(),
  cancelledReceived: cancelled.received(),
  failures: pool().failures - failures,
  cpuMs: (cpu.user + cpu.system) / 1000
}
const timeout = () => sleep(5000).then(() => ({ reason: "timed out" }))

// Cancelling a session that waits for a pipe; the fds it frees let the other one go on.
cancelled.session.cancel()
const cancel = await Promise.race([cancelled.session.done, timeout()])
await waitFor(() => waiter.received() === 5, "the waiting bytes", 3000).catch(() => {})
const recovered = waiter.received()

// An end of stream is noticed without a pipe.
exhaust()
await stall()
exhaust()
failures = pool().failures
ender.client.end()
const ended = await Promise.race([ender.session.done, timeout()])
const endFailures = pool().failures - failures

release()
for (const staller of stallers) staller.session.cancel()
waiter.client.end()
const results = await Promise.all([...stallers, waiter].map(({ session }) => session.done))
const after = pool()
console.log(JSON.stringify({ starved, cancel, recovered, ended, endFailures, after, results: results.map((r) => r.reason) }))
process.exit(0)
`

const spawnSyncFails = (command: string, args: Array<string>): boolean => {
  try {
    execFileSync(command, args, { stdio: "ignore" })
    return false
  } catch {
    return true
  }
}

const unavailable = support.available ? undefined : support.reason
describe.skipIf(unavailable !== undefined)(
  unavailable === undefined ? "startSplice" : `startSplice (skipped: ${unavailable})`,
  () => {
    it("relays 64 MiB each way at once, with the replayed bytes first", { timeout: 60_000 }, async () => {
      const replay = Buffer.from("handshake replay")
      const relay = await makeRelay({ replay })
      const { client, backend, session } = await relay.connect()
      const up = randomBytes(64 * MiB)
      const down = randomBytes(64 * MiB)
      const expectedUp = sha256(Buffer.concat([replay, up]))
      const atBackend = digestOf(backend, replay.length + up.length)
      const atClient = digestOf(client, down.length)
      client.write(up)
      backend.write(down)
      expect(await atBackend).toBe(expectedUp)
      expect(await atClient).toBe(sha256(down))
      client.end()
      const result = await session.done
      expect(result).toMatchObject({
        reason: "client_closed",
        clientToBackend: up.length,
        backendToClient: down.length,
        pendingToClient: 0,
        pendingToBackend: 0
      })
      await closed(backend)
    })

    it("keeps bytes Node buffered before the handoff, in order", async () => {
      const early = randomBytes(100 * 1024)
      const greeting = randomBytes(50 * 1024)
      const replay = Buffer.from("replayed")
      const relay = await makeRelay({
        replay,
        greeting,
        // Both sockets must hold unread bytes in Node's buffers when startSplice takes them over.
        beforeSplice: async (fromClient, toBackend) => {
          await waitFor(() => fromClient.readableLength > 0 && toBackend.readableLength > 0, { what: "buffered bytes" })
        }
      })
      const { client, backend, session } = await relay.connect(early)
      const late = Buffer.from("after the handoff")
      const atBackend = digestOf(backend, replay.length + early.length + late.length)
      const atClient = digestOf(client, greeting.length)
      client.write(late)
      expect(await atBackend).toBe(sha256(Buffer.concat([replay, early, late])))
      expect(await atClient).toBe(sha256(greeting))
      session.cancel()
      expect(await session.done).toMatchObject({
        reason: "cancelled",
        clientToBackend: early.length + late.length,
        backendToClient: greeting.length
      })
    })

    it("ends when the backend closes, after delivering its last bytes", async () => {
      const relay = await makeRelay()
      const { client, backend, session, proxySockets } = await relay.connect()
      const received = collect(client)
      backend.end("goodbye")
      expect((await received).toString()).toBe("goodbye")
      expect(await session.done).toMatchObject({ reason: "backend_closed", backendToClient: 7 })
      expect(proxySockets.every((socket) => socket.destroyed)).toBe(true)
    })

    it("bounds the bytes waiting unsent in both relayed sockets to 32 KiB (TCP_NOTSENT_LOWAT), and only there", async () => {
      const native = addon()
      const relay = await makeRelay()
      const { client, backend, session, proxySockets } = await relay.connect()
      expect(proxySockets.map((socket) => native.getNotSentLowat(tcpFdOf(socket)!))).toEqual([32 * 1024, 32 * 1024])
      // The peers' sockets keep the system default.
      expect([client, backend].map((socket) => native.getNotSentLowat(tcpFdOf(socket)!))).toEqual([0, 0])
      backend.end()
      await session.done
    })

    it("lets go of the session from both sockets once it has ended", async () => {
      const relay = await makeRelay()
      const { backend, session, proxySockets } = await relay.connect()
      const sessionOf = (socket: Socket): unknown => {
        const key = Object.getOwnPropertySymbols(socket).find((symbol) => symbol.description === "portal.spliceSession")
        return key === undefined ? undefined : (socket as unknown as Record<symbol, unknown>)[key]
      }
      expect(proxySockets.map(sessionOf)).toEqual([session, session])
      backend.end()
      await session.done
      expect(proxySockets.map(sessionOf)).toEqual([undefined, undefined])
    })

    it("ends when the client closes, after delivering its last bytes", async () => {
      const relay = await makeRelay()
      const { client, backend, session } = await relay.connect()
      const received = collect(backend)
      client.end("bye")
      expect((await received).toString()).toBe("bye")
      expect(await session.done).toMatchObject({ reason: "client_closed", clientToBackend: 3 })
      await closed(backend)
    })

    it("delivers the backend's last message and a clean end to a client that keeps writing", async () => {
      const relay = await makeRelay()
      const { client, backend, session } = await relay.connect()
      const outcome = ending(client)
      backend.pause()
      // Fill every buffer on the way to the backend, the proxy's receive buffer for the client included.
      client.write(randomBytes(8 * MiB))
      const stop = chatter(client)
      await waitFor(() => session.stats().pendingToBackend > 0, { what: "bytes held for the backend" })
      const kick = randomBytes(32 * 1024)
      backend.end(kick)
      const { data, ended, error } = await outcome
      stop()
      expect(error).toBeUndefined()
      expect(sha256(data)).toBe(sha256(kick))
      expect(ended).toBe(true)
      expect(await session.done).toMatchObject({ reason: "backend_closed", backendToClient: kick.length })
    })

    it("delivers the client's last message and a clean end to a backend that keeps writing", async () => {
      const relay = await makeRelay()
      const { client, backend, session } = await relay.connect()
      const outcome = ending(backend)
      client.pause()
      backend.write(randomBytes(8 * MiB))
      const stop = chatter(backend)
      await waitFor(() => session.stats().pendingToClient > 0, { what: "bytes held for the client" })
      const last = randomBytes(32 * 1024)
      client.end(last)
      const { data, ended, error } = await outcome
      stop()
      expect(error).toBeUndefined()
      expect(sha256(data)).toBe(sha256(last))
      expect(ended).toBe(true)
      expect(await session.done).toMatchObject({ reason: "client_closed", clientToBackend: last.length })
    })

    it("finishes within the linger bound when the other side never closes", async () => {
      const relay = await makeRelay()
      const { client, backend, session, proxySockets } = await relay.connect(undefined, { allowHalfOpen: true })
      const received = collect(client)
      // Half-open: the client goes on writing after the backend's end reached it.
      const stop = chatter(client)
      const startedMs = Date.now()
      backend.end("bye")
      expect((await received).toString()).toBe("bye")
      const result = await session.done
      stop()
      expect(Date.now() - startedMs).toBeLessThan(4000)
      expect(result).toMatchObject({ reason: "backend_closed", backendToClient: 3 })
      expect(proxySockets.every((socket) => socket.destroyed)).toBe(true)
    })

    it("cancel() mid-transfer closes both sockets", async () => {
      const relay = await makeRelay()
      const { client, backend, session, proxySockets } = await relay.connect()
      const stop = stream(backend)
      let received = 0
      client.on("data", (chunk: Buffer) => (received += chunk.length))
      await waitFor(() => received > 4 * MiB, { what: "bytes at the client" })
      session.cancel()
      session.cancel()
      const result = await session.done
      stop()
      expect(result.reason).toBe("cancelled")
      expect(result.backendToClient).toBeGreaterThan(4 * MiB)
      expect(proxySockets.every((socket) => socket.destroyed)).toBe(true)
      await Promise.all([closed(client), closed(backend)])
    })

    it("survives a reset by the client while the backend streams", async () => {
      const relay = await makeRelay()
      const { client, backend, session } = await relay.connect()
      const stop = stream(backend)
      let received = 0
      client.on("data", (chunk: Buffer) => (received += chunk.length))
      await waitFor(() => received > MiB, { what: "bytes at the client" })
      client.resetAndDestroy()
      const result = await session.done
      stop()
      expect(result.reason).toBe("client_closed")
      await closed(backend)
    })

    it("survives a reset by the backend while the client streams", async () => {
      const relay = await makeRelay()
      const { client, backend, session } = await relay.connect()
      const stop = stream(client)
      let received = 0
      backend.on("data", (chunk: Buffer) => (received += chunk.length))
      await waitFor(() => received > MiB, { what: "bytes at the backend" })
      backend.resetAndDestroy()
      const result = await session.done
      stop()
      expect(result.reason).toBe("backend_closed")
      await closed(client)
    })

    it("relays 200 sessions at once", { timeout: 30_000 }, async () => {
      const relay = await makeRelay()
      const one = async () => {
        const { client, backend, session } = await relay.connect()
        backend.pipe(backend)
        const message = randomBytes(10 * 1024)
        const echoed = digestOf(client, message.length)
        client.write(message)
        expect(await echoed).toBe(sha256(message))
        client.end()
        return session.done
      }
      const results = await Promise.all(Array.from({ length: 200 }, one))
      const expected = { reason: "client_closed", clientToBackend: 10 * 1024, backendToClient: 10 * 1024 }
      for (const result of results) expect(result).toMatchObject(expected)
    })

    it("reports growing counters, read times and bytes held for a client that does not read", async () => {
      const relay = await makeRelay()
      const { client, backend, session } = await relay.connect()
      const startedMs = Date.now()
      // The client reads until it is paused below; without a reader the buffers fill and the counters stop early.
      client.on("data", () => {})
      const stop = stream(backend)
      const first = await waitFor(() => (session.stats().backendToClient > 0 ? session.stats() : undefined))
      await waitFor(() => session.stats().backendToClient > first.backendToClient, { what: "growing counter" })
      client.pause()
      const stalled = await waitFor(() => (session.stats().pendingToClient > 0 ? session.stats() : undefined), {
        what: "bytes held for the client"
      })
      expect(stalled.lastBackendReadMs).toBeGreaterThanOrEqual(startedMs - 1000)
      expect(stalled.lastBackendReadMs).toBeLessThanOrEqual(Date.now())
      client.write("ping")
      await waitFor(() => session.stats().clientToBackend === 4, { what: "client bytes counted" })
      expect(session.stats().lastClientReadMs).toBeGreaterThanOrEqual(stalled.lastClientReadMs)
      stop()
      // counters() is stats() without allocating, indexed by SpliceCounter.
      await waitFor(
        () => {
          const stats = session.stats()
          const counters = session.counters()
          const names = Object.keys(SpliceCounter).filter((name) => name !== "closing") as Array<keyof SpliceStats>
          return names.every((name) => counterAt(counters, name) === stats[name]) || undefined
        },
        { what: "counters() matching stats()" }
      )
      expect(counterAt(session.counters(), "clientToBackend")).toBe(4)
      expect(counterAt(session.counters(), "pendingToClient")).toBeGreaterThan(0)
      // Neither side has ended: not closing.
      expect(counterAt(session.counters(), "closing")).toBe(0)
      client.resume()
      session.cancel()
      expect((await session.done).reason).toBe("cancelled")
    })

    it("cancels when the proxy destroys a spliced socket itself", async () => {
      const relay = await makeRelay()
      const { client, backend, session, proxySockets } = await relay.connect()
      proxySockets[0]!.destroy()
      expect((await session.done).reason).toBe("cancelled")
      await Promise.all([closed(client), closed(backend)])
    })

    it("lets go of both fds before the proxy closes one: a connection given the same fd number gets none of its bytes", async () => {
      const relay = await makeRelay()
      const { client, backend, session, proxySockets } = await relay.connect()
      const toClient = proxySockets[0]!
      const stop = stream(backend)
      client.resume()
      await waitFor(() => session.stats().backendToClient > 4 * MiB, { what: "bytes flowing to the client" })
      const probes: Array<Socket> = []
      const probePort = await listen(createServer((socket) => probes.push(socket)))
      const fd = tcpFdOf(toClient)!
      toClient.destroy() // mid-transfer, while the relay splices toward this very fd
      // The next sockets made take the lowest free fd numbers, among them the one just closed.
      let received = 0
      for (let i = 0; i < 50 && !probes.some((socket) => tcpFdOf(socket) === fd); i++) {
        const probe = connect(probePort, "127.0.0.1")
        track(probe)
        await once(probe, "connect")
        probes.push(probe)
      }
      const reused = probes.find((socket) => tcpFdOf(socket) === fd)
      expect(reused, `a probe socket with fd ${fd}`).toBeDefined()
      let ended = 0
      for (const probe of probes) probe.on("data", (chunk: Buffer) => (received += chunk.length)).on("end", () => ended++)
      expect((await session.done).reason).toBe("cancelled")
      await new Promise((settle) => setTimeout(settle, 200)) // the backend still streams at the session's other fd
      stop()
      // Neither bytes nor a FIN from the old session reached the connection that took its fd number.
      expect(received).toBe(0)
      expect(ended).toBe(0)
      await Promise.all([closed(client), closed(backend)])
      for (const probe of probes) probe.destroy()
    })

    it("refuses sockets it cannot splice", async () => {
      const relay = await makeRelay()
      const { proxySockets, session } = await relay.connect()
      session.cancel()
      await session.done
      expect(() => startSplice(proxySockets[0]!, proxySockets[1]!)).toThrow(/not a connected TCP socket/)
    })

    it.skipIf(spawnSyncFails("prlimit", ["--version"]))(
      "waits without spinning for a pipe when no fd is left, and still ends",
      { timeout: 30_000 },
      async () => {
        const root = resolve(".")
        const dir = mkdtempSync(join(tmpdir(), "portal-starved-"))
        try {
          const script = join(dir, "starved.ts")
          writeFileSync(script, starvedChild(root))
          const child = spawn(process.execPath, [join(root, "node_modules/vite-node/vite-node.mjs"), script], {
            cwd: root,
            stdio: ["ignore", "pipe", "pipe"]
          })
          let stdout = ""
          let stderr = ""
          child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
          child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
          const [code] = (await once(child, "exit")) as [number | null]
          expect(code, stderr).toBe(0)
          const report = JSON.parse(stdout.trim().split("\n").pop()!)
          // Waiting: nothing read, pipe2() retried a few times a second, not in a loop.
          expect(report.starved.waiterReceived).toBe(0)
          expect(report.starved.cancelledReceived).toBe(0)
          expect(report.starved.failures).toBeGreaterThan(0)
          expect(report.starved.failures).toBeLessThan(100)
          expect(report.starved.cpuMs).toBeLessThan(250)
          expect(report.cancel.reason).toBe("cancelled")
          expect(report.recovered).toBe(5)
          expect(report.ended.reason).toBe("client_closed")
          expect(report.endFailures).toBeGreaterThan(0)
          expect(report.after.busy).toBe(0)
          expect(report.results).toEqual([...Array<string>(6).fill("cancelled"), "client_closed"])
        } finally {
          rmSync(dir, { recursive: true, force: true })
        }
      }
    )

    it("leaves no file descriptor open", { timeout: 30_000 }, async () => {
      const relay = await makeRelay()
      const run = async (end: (relayed: Relayed) => void) => {
        const relayed = await relay.connect()
        const received = collect(relayed.backend)
        relayed.client.write("data")
        await waitFor(() => relayed.session.stats().clientToBackend === 4, { what: "relayed bytes" })
        end(relayed)
        await relayed.session.done
        await received
        await Promise.all([closed(relayed.client), closed(relayed.backend)])
      }
      await run(({ client }) => client.end()) // makes the relay, whose epoll fd stays
      const before = openFds()
      for (let i = 0; i < 10; i++) {
        await run(({ client }) => client.end())
        await run(({ backend }) => backend.resetAndDestroy())
        await run(({ session }) => session.cancel())
      }
      await waitFor(() => openFds() <= before, { what: `open fds back to ${before}` })
    })

    it("holds 2 fds per idle session, and pipes only while bytes are in flight", { timeout: 30_000 }, async () => {
      const native = addon()
      const relay = await makeRelay()
      const sessions = 200
      const echo = async () => {
        const relayed = await relay.connect()
        relayed.backend.pipe(relayed.backend)
        const message = randomBytes(32 * 1024)
        const echoed = digestOf(relayed.client, message.length)
        relayed.client.write(message)
        expect(await echoed).toBe(sha256(message))
        relayed.client.removeAllListeners("data")
        return relayed
      }
      const first = await echo() // makes the relay
      first.client.end()
      await first.session.done
      await closed(first.client)
      const before = fdKinds()
      const relayed = await Promise.all(Array.from({ length: sessions }, echo))
      await waitFor(() => native.pipePoolDiagnostic().busy === 0, { what: "every pipe back in the pool" })
      const idle = fdKinds()
      // Per session, the test holds 2 sockets of its own (its client, the backend's accepted socket) and the proxy 2:
      // its Node sockets, whose fds the relay borrows. Pipes only add the pool, which is bounded.
      const proxyPerSession = (idle.total - before.total - 2 * sessions) / sessions
      expect(proxyPerSession).toBeGreaterThanOrEqual(2)
      expect(proxyPerSession).toBeLessThan(3)
      const pool = native.pipePoolDiagnostic()
      expect(pool.maxIdle).toBe(64)
      expect(pool.idle).toBeLessThanOrEqual(pool.maxIdle)
      expect(idle.pipes - before.pipes).toBeLessThanOrEqual(2 * pool.maxIdle)

      // A destination that does not read keeps its pipe; it comes back once drained.
      const { client, backend, session } = relayed[0]!
      backend.unpipe(backend)
      client.pause()
      const stop = stream(backend)
      await waitFor(() => session.stats().pendingToClient > 0, { what: "bytes held for the client" })
      expect(native.pipePoolDiagnostic().busy).toBeGreaterThanOrEqual(1)
      stop()
      client.resume()
      await waitFor(() => session.stats().pendingToClient === 0 && native.pipePoolDiagnostic().busy === 0, {
        what: "the pipe back in the pool"
      })

      for (const { client } of relayed) client.end()
      const results = await Promise.all(relayed.map(({ session }) => session.done))
      for (const result of results) expect(result.reason).toBe("client_closed")
    })
  }
)

/** The addon in a worker thread of its own (test/peers/spliceWorker.mjs): each environment has its own relay. */
const spliceWorker = (mode: "complete" | "throw" | "abandon") => {
  const worker = new Worker(resolve("test/peers/spliceWorker.mjs"), {
    workerData: { addon: resolve("build/Release/portal_splice.node"), mode }
  })
  const messages: Array<Record<string, unknown>> = []
  worker.on("message", (message: Record<string, unknown>) => messages.push(message))
  const exited = new Promise<number>((settle) => worker.once("exit", settle))
  const message = (key: string) =>
    waitFor(() => messages.find((m) => key in m)?.[key], { what: `the worker's ${key} message`, timeoutMs: 10_000 })
  return { worker, exited, message }
}

describe.skipIf(unavailable !== undefined)("the relay of each Node environment", () => {
  it("relays in a worker thread, reports there, and lets the worker exit once nothing is relayed", { timeout: 20_000 }, async () => {
    const { exited, message } = spliceWorker("complete")
    const result = (await message("done")) as Record<string, unknown>
    expect(result).toMatchObject({ reason: "client_closed", clientToBackend: MiB, backendToClient: MiB })
    // Nothing holds the worker's event loop open: it ends by itself.
    expect(await exited).toBe(0)
  })

  it("turns an onDone that throws into an uncaught exception of its thread", { timeout: 20_000 }, async () => {
    const { exited, message } = spliceWorker("throw")
    expect(await message("uncaught")).toBe("onDone threw")
    expect(await exited).toBe(0)
  })

  it("closes what a terminated worker's relay held, and the process relays on", { timeout: 20_000 }, async () => {
    const before = openFds()
    const { worker, exited, message } = spliceWorker("abandon")
    expect(await message("started")).toBe(true)
    await new Promise((settle) => setTimeout(settle, 200)) // bytes in flight through the worker's pipes
    await worker.terminate()
    await exited
    await waitFor(() => openFds() <= before, { what: `open fds back to ${before}` })

    const relay = await makeRelay()
    const relayed = await relay.connect()
    const received = collect(relayed.backend)
    relayed.client.end("still relaying")
    expect((await relayed.session.done).reason).toBe("client_closed")
    expect((await received).toString()).toBe("still relaying")
  })
})
