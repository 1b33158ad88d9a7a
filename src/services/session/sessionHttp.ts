/**
 * One GET to the session service over a small HTTP/1.1 client of Portal's own: a pool of kept-alive connections per
 * origin (TCP, or TLS for https), the request written as one string, the answer read by `httpAnswer.ts`. Measured on
 * a 2.6 GHz Xeon with the same server and answer: about 15 µs of CPU per keep-alive GET against 57 to 66 through
 * `http.get` with a keep-alive agent (its request and response objects, streams and agent bookkeeping), and 270
 * through `fetch`; a client_only login's budget is about 1 ms. The session service's answer is small and bounded.
 *
 * Callbacks, not a promise with an AbortSignal: the bound is a plain timer held by the request (never only by an
 * object a collection could take), and cancelling destroys the connection.
 *
 * A kept-alive connection the service closed while it idled fails the next request before any byte of an answer:
 * that request is sent once more on a new connection (a GET may be repeated).
 */
import type * as Net from "node:net"
import type * as Tls from "node:tls"
import { AnswerReader, type AnswerStep } from "./httpAnswer.js"

const MAX_ANSWER_BYTES = 65_536
/** Idle connections kept per origin, and how long one may idle (below the usual servers' keep-alive timeouts). */
const MAX_IDLE_PER_ORIGIN = 256
const IDLE_MS = 4_000

interface Transports {
  readonly net: typeof import("node:net")
  readonly tls: typeof import("node:tls")
}

let transports: Transports | undefined
let loading: Promise<Transports> | undefined
const loadTransports = (): Promise<Transports> =>
  (loading ??= Promise.all([import("node:net"), import("node:tls")]).then(([net, tls]) => (transports = { net, tls })))

export interface Answer {
  readonly status: number
  readonly text: string
}

/** How a GET ended: an answer, or why there is none (a network error, an answer over 64 KiB, no answer in time). */
export type Outcome = { readonly _tag: "Answer"; readonly answer: Answer } | { readonly _tag: "Failed"; readonly error: Error }

/** Where requests go: one per distinct scheme, host and port. */
interface Origin {
  readonly secure: boolean
  /** For connect(): without IPv6 brackets. */
  readonly host: string
  readonly port: number
  /** For the Host header: as the URL writes it. */
  readonly hostHeader: string
  readonly idle: Array<Net.Socket>
  /** The last TLS session, offered on the next connection to skip a full handshake. */
  tlsSession: Buffer | undefined
}

const origins = new Map<string, Origin>()

const originOf = (url: URL): Origin => {
  const secure = url.protocol === "https:"
  const key = `${url.protocol}//${url.host}`
  let origin = origins.get(key)
  if (origin === undefined) {
    const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
    origin = { secure, host, port: url.port === "" ? (secure ? 443 : 80) : Number(url.port), hostHeader: url.host, idle: [], tlsSession: undefined }
    origins.set(key, origin)
  }
  return origin
}

const connect = ({ net, tls }: Transports, origin: Origin): Net.Socket => {
  if (!origin.secure) {
    const socket = net.connect({ host: origin.host, port: origin.port })
    socket.setNoDelay(true)
    return socket
  }
  const options: Tls.ConnectionOptions = { host: origin.host, port: origin.port, ALPNProtocols: ["http/1.1"] }
  if (net.isIP(origin.host) === 0) options.servername = origin.host
  if (origin.tlsSession !== undefined) options.session = origin.tlsSession
  const socket = tls.connect(options)
  socket.setNoDelay(true)
  socket.on("session", (session: Buffer) => {
    origin.tlsSession = session
  })
  return socket
}

/** Idle connections: forgotten and closed when the service closes them, fails them or they idle too long. */
const onIdleGone = function (this: Net.Socket): void {
  forget(this)
  this.destroy()
}
const idleOrigin = new WeakMap<Net.Socket, Origin>()

const forget = (socket: Net.Socket): void => {
  const origin = idleOrigin.get(socket)
  if (origin === undefined) return
  idleOrigin.delete(socket)
  const at = origin.idle.lastIndexOf(socket) // most often the last: connections are taken most recent first
  if (at >= 0) origin.idle.splice(at, 1)
  socket.off("close", onIdleGone).off("end", onIdleGone).off("error", onIdleGone).off("timeout", onIdleGone).off("data", onIdleGone)
  socket.setTimeout(0)
}

const park = (origin: Origin, socket: Net.Socket): void => {
  if (origin.idle.length >= MAX_IDLE_PER_ORIGIN || socket.destroyed) {
    socket.destroy()
    return
  }
  idleOrigin.set(socket, origin)
  origin.idle.push(socket)
  // Bytes from an idle connection were not asked for: it cannot be trusted with the next answer.
  socket.on("close", onIdleGone).on("end", onIdleGone).on("error", onIdleGone).on("timeout", onIdleGone).on("data", onIdleGone)
  socket.setTimeout(IDLE_MS)
}

/** The most recently parked connection (the least likely to have been closed by the service), if any. */
const unpark = (origin: Origin): Net.Socket | undefined => {
  const socket = origin.idle[origin.idle.length - 1]
  if (socket !== undefined) forget(socket)
  return socket
}

const requestText = (origin: Origin, url: URL): string =>
  `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${origin.hostHeader}\r\nAccept: application/json\r\nUser-Agent: Portal\r\nConnection: keep-alive\r\n\r\n`

/**
 * GETs `url` and calls `done` once with the outcome, unless cancelled first. Returns the cancel: it closes the
 * connection and `done` is not called.
 */
export const getText = (url: URL, timeoutMs: number, done: (outcome: Outcome) => void): (() => void) => {
  let socket: Net.Socket | undefined
  let finished = false
  const origin = originOf(url)
  const request = requestText(origin, url)
  /** Ends the GET once: false when it had already ended. */
  const end = (): boolean => {
    if (finished) return false
    finished = true
    clearTimeout(timer)
    return true
  }
  const finish = (outcome: Outcome): void => {
    if (end()) done(outcome)
  }
  const fail = (error: Error): void => {
    socket?.destroy()
    finish({ _tag: "Failed", error })
  }
  const timer = setTimeout(() => fail(new Error("no answer in time")), timeoutMs)

  const send = (loaded: Transports, connection: Net.Socket, reused: boolean): void => {
    socket = connection
    const reader = new AnswerReader(MAX_ANSWER_BYTES)
    const detach = (): void => {
      connection.off("data", onData).off("end", onEnd).off("error", onError).off("close", onClose)
    }
    const settle = (step: AnswerStep): void => {
      if (step._tag === "More") return
      detach()
      if (step._tag === "Invalid") return fail(new Error(step.reason))
      if (step.reusable && !finished) park(origin, connection)
      else connection.destroy()
      finish({ _tag: "Answer", answer: { status: step.status, text: step.body.toString("utf8") } })
    }
    /** A reused connection the service had closed: the request goes once more on a new one. */
    const retried = (): boolean => {
      if (!reused || reader.started || finished) return false
      detach()
      connection.destroy()
      send(loaded, connect(loaded, origin), false)
      return true
    }
    const onData = (chunk: Buffer): void => settle(reader.push(chunk))
    const onEnd = (): void => {
      if (!retried()) settle(reader.end())
    }
    const onError = (error: Error): void => {
      if (!retried()) {
        detach()
        fail(error)
      }
    }
    const onClose = (): void => {
      if (!retried()) {
        detach()
        const step = reader.end()
        fail(new Error(step._tag === "Invalid" ? step.reason : "the connection closed"))
      }
    }
    connection.on("data", onData).on("end", onEnd).on("error", onError).on("close", onClose)
    connection.write(request, "latin1")
  }

  const start = (loaded: Transports): void => {
    if (finished) return
    const idle = unpark(origin)
    send(loaded, idle ?? connect(loaded, origin), idle !== undefined)
  }
  if (transports !== undefined) start(transports)
  else loadTransports().then(start, (error: unknown) => finish({ _tag: "Failed", error: error instanceof Error ? error : new Error(String(error)) }))
  return () => {
    if (end()) socket?.destroy()
  }
}
