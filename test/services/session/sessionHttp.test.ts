/**
 * The session service client against real servers on loopback: Node's HTTP server (kept-alive connections, chunked
 * answers, a keep-alive timeout shorter than the client's), raw TCP servers that answer oddly, and TLS (a self-signed
 * certificate made with the openssl command: refused in this process, trusted in a child given it as a CA).
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { getText, type Outcome } from "../../../src/services/session/sessionHttp.js"

const closers: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const close of closers.splice(0)) await close()
})

/** Listens on loopback; after the test the server and every connection it took are closed. */
const listen = async <S extends net.Server>(server: S): Promise<number> => {
  const sockets = new Set<net.Socket>()
  server.on(server instanceof https.Server ? "secureConnection" : "connection", (socket: net.Socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })
  closers.push(
    () =>
      new Promise((done) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => done())
      })
  )
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done))
  return (server.address() as net.AddressInfo).port
}

const get = (url: string, timeoutMs = 3_000): Promise<Outcome> => new Promise((done) => getText(new URL(url), timeoutMs, done))

const answer = (outcome: Outcome) => {
  if (outcome._tag !== "Answer") throw new Error(`expected an answer, got ${outcome.error.message}`)
  return outcome.answer
}
const failure = (outcome: Outcome): string => {
  if (outcome._tag !== "Failed") throw new Error(`expected a failure, got HTTP ${outcome.answer.status}`)
  return outcome.error.message
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

describe("the session service client", () => {
  it("asks over one kept-alive connection, with the path, query and Host the URL gives", async () => {
    const seen: Array<string> = []
    let connections = 0
    const server = http.createServer((request, response) => {
      seen.push(`${request.method} ${request.url} ${request.headers.host}`)
      response.writeHead(200, { "content-type": "application/json" }).end(`{"n":${seen.length}}`)
    })
    server.on("connection", () => connections++)
    const port = await listen(server)
    for (let i = 1; i <= 5; i++) expect(answer(await get(`http://127.0.0.1:${port}/session/minecraft/hasJoined?username=Steve&serverId=-1f${i}`))).toEqual({ status: 200, text: `{"n":${i}}` })
    expect(seen[4]).toBe(`GET /session/minecraft/hasJoined?username=Steve&serverId=-1f5 127.0.0.1:${port}`)
    expect(connections).toBe(1)
  })

  it("takes answers written in chunks, and runs concurrent requests on connections of their own", async () => {
    const server = http.createServer((_request, response) => {
      response.writeHead(200)
      response.write('{"id":')
      setTimeout(() => response.end('"x"}'), 5)
    })
    const port = await listen(server)
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => get(`http://127.0.0.1:${port}/x`)))
    expect(outcomes.map((outcome) => answer(outcome).text)).toEqual(Array.from({ length: 20 }, () => '{"id":"x"}'))
  })

  it("outlives a service that closes its idle connections first: the next request goes on a new one", async () => {
    let connections = 0
    const server = http.createServer((_request, response) => response.writeHead(204).end())
    // Node's server closes an idle connection within about a second of its keep-alive timeout.
    server.keepAliveTimeout = 50
    server.on("connection", () => connections++)
    const port = await listen(server)
    expect(answer(await get(`http://127.0.0.1:${port}/a`)).status).toBe(204)
    await sleep(1_500)
    expect(answer(await get(`http://127.0.0.1:${port}/b`)).status).toBe(204)
    expect(connections).toBe(2)
  })

  it("sends a request again once when a reused connection closes before any answer, and only then", async () => {
    // Answers the first request of each connection, then closes the connection on the next without a word.
    let connections = 0
    const server = net.createServer((socket) => {
      connections++
      let requests = 0
      socket.on("data", () => {
        requests++
        if (requests === 1) socket.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        else socket.destroy()
      })
    })
    const port = await listen(server)
    expect(answer(await get(`http://127.0.0.1:${port}/1`)).text).toBe("ok")
    // The kept connection closes on the second request: it goes again on a new connection, which answers.
    expect(answer(await get(`http://127.0.0.1:${port}/2`)).text).toBe("ok")
    expect(connections).toBe(2)
    // A new connection that closes without an answer is a failure, not another try.
    const silent = net.createServer((socket) => socket.on("data", () => socket.end()))
    const silentPort = await listen(silent)
    expect(failure(await get(`http://127.0.0.1:${silentPort}/`))).toBe("the connection closed before an answer")
  })

  it("does not keep a connection the answer closes, or one that says more than it was asked", async () => {
    let connections = 0
    const server = net.createServer((socket) => {
      connections++
      socket.on("data", () => socket.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokSURPRISE"))
    })
    const port = await listen(server)
    expect(answer(await get(`http://127.0.0.1:${port}/`)).text).toBe("ok")
    expect(answer(await get(`http://127.0.0.1:${port}/`)).text).toBe("ok")
    expect(connections).toBe(2)
    const closing = http.createServer((_request, response) => response.writeHead(200, { connection: "close" }).end("bye"))
    let closingConnections = 0
    closing.on("connection", () => closingConnections++)
    const closingPort = await listen(closing)
    for (let i = 0; i < 3; i++) expect(answer(await get(`http://127.0.0.1:${closingPort}/`)).text).toBe("bye")
    expect(closingConnections).toBe(3)
  })

  it("fails with the reason on nonsense, on a connection cut mid-answer, on silence and on no service", async () => {
    const nonsense = net.createServer((socket) => socket.on("data", () => socket.end("SSH-2.0-OpenSSH\r\n\r\n")))
    expect(failure(await get(`http://127.0.0.1:${await listen(nonsense)}/`))).toMatch(/not an HTTP\/1.x status line/)
    const cut = net.createServer((socket) => socket.on("data", () => socket.end("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf")))
    expect(failure(await get(`http://127.0.0.1:${await listen(cut)}/`))).toBe("the connection closed in the middle of the answer")
    const silent = net.createServer((socket) => socket.resume())
    const started = Date.now()
    expect(failure(await get(`http://127.0.0.1:${await listen(silent)}/`, 150))).toBe("no answer in time")
    expect(Date.now() - started).toBeLessThan(2_000)
    const unused = net.createServer()
    const gonePort = await listen(unused)
    await new Promise((done) => unused.close(done))
    expect(failure(await get(`http://127.0.0.1:${gonePort}/`))).toMatch(/ECONNREFUSED/)
  })

  it("cancelled, it closes its connection and says nothing", async () => {
    let closed = false
    const server = net.createServer((socket) => socket.resume().on("close", () => (closed = true)))
    const port = await listen(server)
    let called = false
    const cancel = getText(new URL(`http://127.0.0.1:${port}/`), 3_000, () => (called = true))
    await sleep(50)
    cancel()
    for (let i = 0; i < 100 && !closed; i++) await sleep(10)
    expect(closed).toBe(true)
    expect(called).toBe(false)
  })

  describe("over TLS", () => {
    const dir = mkdtempSync(join(tmpdir(), "portal-tls-"))
    const key = join(dir, "key.pem")
    const cert = join(dir, "cert.pem")
    afterAll(() => rmSync(dir, { recursive: true, force: true }))
    beforeAll(() => {
      execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], { stdio: "ignore" })
    })
    const tlsServer = async (): Promise<{ port: number; handshakes: () => number }> => {
      let handshakes = 0
      const server = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (_request, response) => response.writeHead(200).end('{"secure":true}'))
      server.on("secureConnection", () => handshakes++)
      return { port: await listen(server), handshakes: () => handshakes }
    }

    it("refuses a service whose certificate no authority vouches for", async () => {
      const { port } = await tlsServer()
      expect(failure(await get(`https://127.0.0.1:${port}/`))).toMatch(/self-signed certificate/)
    })

    it("asks over TLS, with the certificate checked against the host, keeping the connection", { timeout: 20_000 }, async () => {
      const { port, handshakes } = await tlsServer()
      // A child that trusts the certificate (NODE_EXTRA_CA_CERTS is read at start), running the built module.
      const module = resolve("dist/services/session/sessionHttp.js")
      const script = `
        import { getText } from ${JSON.stringify(module)}
        const get = (url) => new Promise((done) => getText(new URL(url), 3000, done))
        const out = []
        for (const url of ["https://localhost:${port}/a", "https://localhost:${port}/b", "https://127.0.0.1:${port}/c"]) {
          const outcome = await get(url)
          out.push(outcome._tag === "Answer" ? outcome.answer.text : "failed: " + outcome.error.message)
        }
        console.log(JSON.stringify(out))
        process.exit(0)`
      const child = spawn(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, NODE_EXTRA_CA_CERTS: cert } })
      let output = ""
      child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
      child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
      await new Promise((done) => child.on("exit", done))
      expect(JSON.parse(output.trim())).toEqual(['{"secure":true}', '{"secure":true}', '{"secure":true}'])
      // localhost twice over one connection; 127.0.0.1 is another origin.
      expect(handshakes()).toBe(2)
    })
  })
})
