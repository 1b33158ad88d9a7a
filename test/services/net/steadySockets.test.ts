/** Accepting and connecting with complete socket options behaves as Node's own accept and connect, on real sockets. */
import { once } from "node:events"
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { acceptSteady, connectSteady } from "../../../src/services/net/steadySockets.js"

const servers: Array<net.Server> = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
})

const listening = async (options: net.ServerOpts = {}): Promise<{ server: net.Server; port: number; steady: boolean }> => {
  const server = net.createServer(options)
  servers.push(server)
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const steady = acceptSteady(server)
  return { server, port: (server.address() as net.AddressInfo).port, steady }
}

const connections = (server: net.Server): Promise<number> =>
  new Promise((resolve, reject) => server.getConnections((error, count) => (error ? reject(error) : resolve(count))))

describe("acceptSteady", () => {
  it("takes effect on this Node, and accepted sockets are Node's: paused as asked, owned by the server, counted", async () => {
    const { server, port, steady } = await listening({ pauseOnConnect: true })
    expect(steady).toBe(true)
    const accepted = once(server, "connection") as Promise<[net.Socket]>
    const client = net.connect(port, "127.0.0.1")
    const [socket] = await accepted
    expect((socket as net.Socket & { server?: net.Server }).server).toBe(server)
    expect(socket.isPaused()).toBe(true)
    expect(socket.allowHalfOpen).toBe(false)
    expect(await connections(server)).toBe(1)

    client.write("ping")
    socket.resume()
    const [data] = (await once(socket, "data")) as [Buffer]
    expect(data.toString()).toBe("ping")
    socket.end("pong")
    const [reply] = (await once(client, "data")) as [Buffer]
    expect(reply.toString()).toBe("pong")

    client.destroy()
    await once(socket, "close")
    expect(await connections(server)).toBe(0)
  })

  it("lets server.close finish once the accepted connections have closed", async () => {
    const { server, port } = await listening()
    const accepted = once(server, "connection") as Promise<[net.Socket]>
    const client = net.connect(port, "127.0.0.1")
    const [socket] = await accepted
    let closed = false
    servers.splice(servers.indexOf(server), 1)
    const done = new Promise<void>((resolve) => server.close(() => resolve())).then(() => void (closed = true))
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(closed).toBe(false)
    socket.destroy()
    client.destroy()
    await done
    expect(closed).toBe(true)
  })

  it("keeps Node's cap: a connection over maxConnections is dropped with a drop event", async () => {
    const { server, port } = await listening()
    server.maxConnections = 1
    const first = once(server, "connection") as Promise<[net.Socket]>
    const a = net.connect(port, "127.0.0.1")
    await first
    const dropped = once(server, "drop") as Promise<[{ remoteAddress?: string } | undefined]>
    const b = net.connect(port, "127.0.0.1")
    b.on("error", () => {})
    const [data] = await dropped
    expect(data?.remoteAddress).toBe("127.0.0.1")
    await once(b, "close")
    expect(await connections(server)).toBe(1)
    a.destroy()
  })

  it("honours allowHalfOpen asked of the server", async () => {
    const { server, port } = await listening({ allowHalfOpen: true })
    const accepted = once(server, "connection") as Promise<[net.Socket]>
    const client = net.connect(port, "127.0.0.1")
    const [socket] = await accepted
    expect(socket.allowHalfOpen).toBe(true)
    client.end()
    await once(socket, "end")
    // Half open: the accepted side can still write after the client's end.
    socket.end("after")
    const [data] = (await once(client, "data")) as [Buffer]
    expect(data.toString()).toBe("after")
    client.destroy()
  })

  it("changes nothing on a server that is not listening", () => {
    const server = net.createServer()
    expect(acceptSteady(server)).toBe(false)
  })
})

describe("connectSteady", () => {
  it("connects and exchanges bytes like net.connect", async () => {
    const { server, port } = await listening()
    server.on("connection", (socket: net.Socket) => socket.pipe(socket))
    const socket = connectSteady("127.0.0.1", port, true)
    await once(socket, "connect")
    expect(socket.allowHalfOpen).toBe(false)
    socket.write("echo")
    const [data] = (await once(socket, "data")) as [Buffer]
    expect(data.toString()).toBe("echo")
    socket.destroy()
    await once(socket, "close")
  })

  it("reports a refused connection as an error", async () => {
    const { server, port } = await listening()
    await new Promise<void>((resolve) => server.close(() => resolve()))
    servers.splice(servers.indexOf(server), 1)
    const socket = connectSteady("127.0.0.1", port, false)
    const [error] = (await once(socket, "error")) as [NodeJS.ErrnoException]
    expect(error.code).toBe("ECONNREFUSED")
  })
})
