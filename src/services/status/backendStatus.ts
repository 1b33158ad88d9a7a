/**
 * One status request to a backend, as StatusService (the live answer to a ping) and HealthMonitor (a `status_ping`
 * probe) both make it: connect, write the opening (a PROXY header if the server wants one, the handshake) and the
 * status request, read one frame of bounded size within a time limit, and decode it with Schema. Whatever the
 * backend sends, the result is a status JSON object or a `StatusFetchError` naming the reason; nothing here throws.
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import type * as net from "node:net"
import { formatHostPort } from "../../schema/HostPort.js"
import type { BackendAddress } from "../../schema/ServerConfig.js"
import { MAX_STATUS_FRAME_BYTES, readStatusResponse, STATUS_REQUEST, type StatusJson } from "../../protocol/status.js"
import { ConnectionClosed, done, failParse, needMore, type Parse, ReadTimeout, SocketReader, writeAll } from "../net/SocketReader.js"
import { connectSteady } from "../net/steadySockets.js"
import { oneLine } from "../parseIssue.js"
import { decodeStatusJson } from "./statusJson.js"

export type StatusFetchReason =
  /** No connection to the address (a probe's own connect): refused, no route, no answer in time. */
  | "unreachable"
  /** Connected, but the backend closed (or the connection broke) before a whole answer. */
  | "closed"
  /** Connected, but no whole answer within the time limit. */
  | "timeout"
  /** An answer that is not a status answer: not a status frame, not UTF-8, not JSON, not a status JSON object. */
  | "bad_answer"

export class StatusFetchError extends Data.TaggedError("StatusFetchError")<{
  readonly reason: StatusFetchReason
  /** What happened, in one line (for `unreachable`, the connect error code such as `ECONNREFUSED`). */
  readonly detail: string
  /** The backend address asked, `host:port`. */
  readonly address: string
}> {
  override get message() {
    return this.detail
  }
}

export interface StatusConnection {
  readonly socket: net.Socket
  readonly address: BackendAddress
}

export interface FetchedStatus {
  readonly json: StatusJson
  /** The address that answered. */
  readonly address: BackendAddress
}

export interface FetchStatusOptions<E1, E2, R> {
  /** Opens the connection; it is closed when the fetch ends, whatever the outcome. */
  readonly connect: Effect.Effect<StatusConnection, E1, R | Scope.Scope>
  /** What goes before the status request on the connected address: the PROXY header if any, then the handshake. */
  readonly opening: (address: BackendAddress) => Effect.Effect<ReadonlyArray<Buffer>, E2, R>
  /** How long the backend may take to answer once connected. */
  readonly readTimeoutMs: number
}

/** The status answer of one backend: connect, opening, status request, one frame, Schema decode. */
export const fetchBackendStatus = <E1, E2, R>(
  options: FetchStatusOptions<E1, E2, R>
): Effect.Effect<FetchedStatus, StatusFetchError | E1 | E2, Exclude<R, Scope.Scope>> =>
  Effect.scoped(
    Effect.flatMap(options.connect, (connection) =>
      Effect.flatMap(options.opening(connection.address), (opening) =>
        Effect.map(requestStatus(connection, opening, options.readTimeoutMs), (json) => ({ json, address: connection.address }))
      )
    )
  )

/** Writes the opening and the status request on a connected socket and reads the answer. */
const requestStatus = (
  connection: StatusConnection,
  opening: ReadonlyArray<Buffer>,
  readTimeoutMs: number
): Effect.Effect<StatusJson, StatusFetchError> => {
  const address = formatHostPort(connection.address)
  const fail = (reason: StatusFetchReason, detail: string) => new StatusFetchError({ reason, detail, address })
  const reader = new SocketReader(connection.socket)
  const parse = (buffer: Buffer): Parse<StatusJson, StatusFetchError> => {
    const read = readStatusResponse(buffer)
    switch (read._tag) {
      case "Incomplete":
        return needMore
      case "Invalid":
        return failParse(fail("bad_answer", oneLine(`not a status response: ${read.reason}`)))
      case "Response":
        return Either.match(decodeStatusJson(read.json), {
          onLeft: (reason) => failParse(fail("bad_answer", reason)),
          onRight: (json) => done(json, read.end)
        })
    }
  }
  return writeAll(connection.socket, Buffer.concat([...opening, STATUS_REQUEST])).pipe(
    Effect.mapError((error) => fail("closed", oneLine(`the connection failed while sending the request (${describeSocketError(error)})`))),
    Effect.zipRight(
      Effect.mapError(reader.read("the backend's status answer", MAX_STATUS_FRAME_BYTES, readTimeoutMs, parse), (error): StatusFetchError => {
        if (error instanceof StatusFetchError) return error
        if (error instanceof ReadTimeout) return fail("timeout", `no answer within ${Duration.format(Duration.millis(error.ms))}`)
        if (error instanceof ConnectionClosed) {
          return fail("closed", reader.peekBuffered().length === 0 ? "closed the connection without answering" : "closed the connection in the middle of its answer")
        }
        return fail("bad_answer", oneLine(error.message))
      })
    )
  )
}

/** A connect error's code (`ECONNREFUSED`) when it has one, else its message. */
const describeSocketError = (error: Error): string =>
  "code" in error && typeof error.code === "string" ? error.code : error.message

/**
 * A connection to one address (a health probe's), closed with the current scope. Bounded by `timeoutMs`, and
 * interruptible: a probe's time limit ends a connect to an address that never answers.
 */
export const connectTo = (address: BackendAddress, timeoutMs: number): Effect.Effect<StatusConnection, StatusFetchError, Scope.Scope> =>
  Effect.suspend(() => {
    const holder: { socket: net.Socket | undefined } = { socket: undefined }
    const connect = Effect.async<StatusConnection, StatusFetchError>((resume) => {
      const socket = connectSteady(address.host, address.port, false)
      holder.socket = socket
      const failed = (detail: string) => {
        clearTimeout(timer)
        socket.destroy()
        resume(Effect.fail(new StatusFetchError({ reason: "unreachable", detail, address: formatHostPort(address) })))
      }
      const timer = setTimeout(() => failed(`no connection within ${Duration.format(Duration.millis(timeoutMs))}`), timeoutMs)
      socket.once("error", (error) => failed(describeSocketError(error)))
      socket.once("connect", () => {
        clearTimeout(timer)
        socket.removeAllListeners("error")
        // Later errors end in close, which the read sees; this listener keeps them from being uncaught.
        socket.on("error", () => {})
        resume(Effect.succeed({ socket, address }))
      })
      return Effect.sync(() => {
        clearTimeout(timer)
        socket.destroy()
      })
    })
    // The finalizer goes first, so that a socket is never left open whatever interrupts what.
    return Effect.zipRight(Effect.addFinalizer(() => Effect.sync(() => holder.socket?.destroy())), connect)
  })
