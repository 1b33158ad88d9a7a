/**
 * The trace of one connection as the data plane records it: a plain record, no OpenTelemetry code. The phases fill
 * it as they go (the times of the phase boundaries and what each found); when the connection ends (its relay ends,
 * or its setup) it is handed over whole, on the main thread straight to the exporter, from a worker thread in its
 * batched messages. The main thread turns it into spans (telemetry/spans.ts).
 *
 * Only a traced connection has one (`Connection.trace`): telemetry off, or a ping that was not sampled, leaves it
 * undefined and each phase pays one check. The decision: at the connection's start, at the ping ratio (so that
 * connections refused before their handshake follow it too); a login that was not picked then gets one at its
 * handshake, since every login is traced.
 *
 * Times are `performance.now()` of the thread that recorded them (milliseconds, fractional); `origin` is that
 * thread's `performance.timeOrigin`, so `origin + t` is the wall-clock time in epoch milliseconds.
 */
import type { RejectReason } from "../Stats.js"

/** How a connection ended, as its root span says (`portal.outcome`). */
export type TraceOutcome =
  /** A server-list ping answered. */
  | "status"
  /** A login handed to a relay; the session's end closed the trace. */
  | "relayed"
  /** Refused by Portal (`reason` says why: a RejectReason, or `outdated_client`). */
  | "refused"
  /** Bad bytes, a timeout, a peer gone mid-read (`reason` has the error). */
  | "error"
  /** Closed by the client before Portal answered. */
  | "closed"

/** One backend connect attempt. */
export interface TracedAttempt {
  /** `host:port`. */
  readonly address: string
  readonly start: number
  readonly end: number
  /** Why it failed; undefined for the attempt that connected. */
  readonly error: string | undefined
}

export interface ConnectionTrace {
  origin: number
  connectionId: number
  /** 0: the main thread; i: worker thread i. */
  worker: number
  start: number
  /** When the connection ended (its setup, or its relayed session). */
  end: number
  outcome: TraceOutcome
  reason: string | undefined
  clientAddress: string | undefined
  clientPort: number
  /** When the handshake (or legacy ping) was read; NaN before. */
  handshakeEnd: number
  handshake: "status" | "login" | "legacy_status" | undefined
  protocolVersion: number
  /** The server address the handshake names, and its port. */
  domain: string | undefined
  domainPort: number
  /** The configured server it was routed to, and its proxy_mode. */
  server: string | undefined
  proxyMode: string | undefined
  statusStart: number
  statusEnd: number
  /** Where the answer came from (StatusService: `cache`, `backend`, `composed`, `stale`, ...). */
  statusSource: string | undefined
  /** The server state the answer shows. */
  statusState: string | undefined
  admissionStart: number
  admissionEnd: number
  /** `admitted`, or the refusal's reason. */
  admission: string | undefined
  player: string | undefined
  wakeStart: number
  wakeEnd: number
  /** `online`, `starting` or the state that kept the server from waking. */
  wake: string | undefined
  authenticationStart: number
  authenticationEnd: number
  authentication: string | undefined
  attempts: Array<TracedAttempt> | undefined
  forwardingStart: number
  forwardingEnd: number
  /** The forwarding mode of the handshake the backend saw. */
  forwarding: string | undefined
  sessionStart: number
  sessionEnd: number
  bytesIn: number
  bytesOut: number
  /** How the relay ended (RelayEnd: `client_closed`, `backend_closed`, `read_timeout`, ..., `ended`). */
  closedBy: string | undefined
  /** The relay's error, or why it was ended from outside. */
  closedDetail: string | undefined
}

export const newTrace = (connectionId: number, worker: number, start: number): ConnectionTrace => ({
  origin: performance.timeOrigin,
  connectionId,
  worker,
  start,
  end: Number.NaN,
  outcome: "closed",
  reason: undefined,
  clientAddress: undefined,
  clientPort: 0,
  handshakeEnd: Number.NaN,
  handshake: undefined,
  protocolVersion: 0,
  domain: undefined,
  domainPort: 0,
  server: undefined,
  proxyMode: undefined,
  statusStart: Number.NaN,
  statusEnd: Number.NaN,
  statusSource: undefined,
  statusState: undefined,
  admissionStart: Number.NaN,
  admissionEnd: Number.NaN,
  admission: undefined,
  player: undefined,
  wakeStart: Number.NaN,
  wakeEnd: Number.NaN,
  wake: undefined,
  authenticationStart: Number.NaN,
  authenticationEnd: Number.NaN,
  authentication: undefined,
  attempts: undefined,
  forwardingStart: Number.NaN,
  forwardingEnd: Number.NaN,
  forwarding: undefined,
  sessionStart: Number.NaN,
  sessionEnd: Number.NaN,
  bytesIn: 0,
  bytesOut: 0,
  closedBy: undefined,
  closedDetail: undefined
})

/** Notes a refusal on a traced connection (a RejectReason, or another word for a refusal without one). */
export const traceRefusal = (trace: ConnectionTrace | undefined, reason: RejectReason | "outdated_client" | "not_authenticated"): void => {
  if (trace === undefined) return
  trace.outcome = "refused"
  trace.reason = reason
}

/** The connection path's tracing: which connections get a record, and where a finished one goes. */
export interface TracingDataPlane {
  /** Whether a connection is traced from its start: true at the ping sampling ratio. */
  readonly sampled: () => boolean
  /** A new record for a traced connection that started at `start`. */
  readonly begin: (connectionId: number, start: number) => ConnectionTrace
  /** Hands over a finished record (its `end` set). */
  readonly finish: (trace: ConnectionTrace) => void
}

/** Sampling at `ratio` (0 to 1) for the thread `worker` (0: the main thread); finished records go to `finish`. */
export const makeTracing = (ratio: number, worker: number, finish: (trace: ConnectionTrace) => void): TracingDataPlane => ({
  sampled: ratio >= 1 ? () => true : ratio <= 0 ? () => false : () => Math.random() < ratio,
  begin: (connectionId, start) => newTrace(connectionId, worker, start),
  finish
})
