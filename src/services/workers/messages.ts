/**
 * What the main thread (the control plane) and a worker thread (a data plane) say to each other. Every message is
 * a plain structured-cloneable object with a `_tag`; calls carry an `id` that their reply repeats.
 */
import type { ServerState } from "../../schema/common.js"
import type { SharedBuffers } from "../shared/SharedState.js"
import type { StatsBuffer } from "../Stats.js"
import type { WorkerListen } from "./listening.js"
import type { Handshake } from "../../protocol/handshake.js"
import type { Ban } from "../bans/file.js"
import type { SessionEntry } from "../PlayerRegistry.js"
import type { EnsureResult } from "../ServerManager.js"
import type { StatusAnswer } from "../StatusService.js"
import type { ChannelDelivery, ChannelQuery, ChannelSession } from "../relay/packet/PacketStart.js"
import type { ConnectionTrace } from "../telemetry/connectionTrace.js"

/** A status answer asked of the main thread, which owns the status cache. */
export interface StatusCall {
  /** Undefined for a domain no server claims. */
  readonly serverId: string | undefined
  readonly state: ServerState
  readonly handshake: Handshake
  readonly clientIp: string
  readonly preamble: Uint8Array | undefined
}

export type WorkerCall =
  | { readonly _tag: "Call"; readonly id: number; readonly method: "ensureOnline"; readonly serverId: string }
  | { readonly _tag: "Call"; readonly id: number; readonly method: "statusAnswer"; readonly request: StatusCall }
  /** The BungeeCord channel's lookup of live sessions, answered from the main thread's registry (every worker's). */
  | { readonly _tag: "Call"; readonly id: number; readonly method: "channelLookup"; readonly query: ChannelQuery }

export type CallResult<C extends WorkerCall> = C extends { readonly method: "ensureOnline" }
  ? EnsureResult
  : C extends { readonly method: "channelLookup" }
    ? ReadonlyArray<ChannelSession>
    : StatusAnswer

/** A worker's session as the main thread's registry lists it, with its byte counts at the time of asking. */
export interface SessionBytes {
  readonly id: number
  readonly bytesIn: number
  readonly bytesOut: number
}

/** Main thread -> worker. */
export type ToWorker =
  | { readonly _tag: "Config"; readonly snapshot: string }
  /**
   * What changed in the bans in force since the last message (or since the worker's start): records to set (each
   * replacing any of its target) and target keys (`targetKey`) to remove, removals first. Not the whole list: with
   * 100,000 bans, copying it to every worker held the main thread for hundreds of milliseconds per ban.
   */
  | { readonly _tag: "BanChanges"; readonly set: ReadonlyArray<Ban>; readonly removed: ReadonlyArray<string> }
  | { readonly _tag: "States"; readonly states: ReadonlyArray<readonly [string, ServerState]> }
  | { readonly _tag: "EndSession"; readonly sessionId: number; readonly reason: string }
  | { readonly _tag: "AskBytes"; readonly id: number }
  /** A BungeeCord delivery for this worker's players; answered with `ChannelDelivered`. */
  | { readonly _tag: "Channel"; readonly id: number; readonly delivery: ChannelDelivery }
  | { readonly _tag: "Reply"; readonly id: number; readonly value: unknown }
  | { readonly _tag: "Drain"; readonly graceMs: number }
  /** Test hook, honoured only where PORTAL_TEST_HOOKS=1: the worker throws from its event loop. */
  | { readonly _tag: "Crash" }

/** Worker -> main thread. */
export type FromWorker =
  | { readonly _tag: "Ready"; readonly address: { readonly host: string; readonly port: number } }
  | { readonly _tag: "Failed"; readonly reason: string }
  | WorkerCall
  /** Sessions that came, found their backend or left since the last batch, in order. */
  | { readonly _tag: "Sessions"; readonly events: ReadonlyArray<SessionEvent> }
  | { readonly _tag: "Bytes"; readonly id: number; readonly sessions: ReadonlyArray<SessionBytes> }
  /** What of a BungeeCord delivery this worker could not make itself, for players other workers relay. */
  | { readonly _tag: "ChannelRoute"; readonly delivery: ChannelDelivery }
  /** The servers of the players a `Channel` delivery reached. */
  | { readonly _tag: "ChannelDelivered"; readonly id: number; readonly reached: ReadonlyArray<string> }
  | { readonly _tag: "Drained" }
  /** Log records, written by the main thread's logger (one format, one output, the worker's index among the fields). */
  | { readonly _tag: "Logs"; readonly records: ReadonlyArray<WorkerLogRecord> }
  /** The records of traced connections that ended since the last batch, for the main thread to export. */
  | { readonly _tag: "Traces"; readonly traces: ReadonlyArray<ConnectionTrace> }

/** A change to a worker's sessions, for the main thread's registry. */
export type SessionEvent =
  | { readonly _tag: "Added"; readonly entry: SessionEntry }
  | { readonly _tag: "Backend"; readonly sessionId: number; readonly backendAddress: string }
  | { readonly _tag: "Identified"; readonly sessionId: number; readonly name: string; readonly uuid: string | undefined }
  | { readonly _tag: "Removed"; readonly sessionId: number; readonly bytesIn: number; readonly bytesOut: number }

/** What a worker thread starts with (`workerData`). */
export interface WorkerData {
  /** 0-based; also the worker's ledger in the shared state. */
  readonly index: number
  readonly shared: SharedBuffers
  /** The rows of the stats counters; this worker writes row `index`. */
  readonly stats: StatsBuffer
  readonly listen: WorkerListen
  readonly snapshot: string
  readonly bans: ReadonlyArray<Ban>
  readonly states: ReadonlyArray<readonly [string, ServerState]>
  readonly log: { readonly format: "pretty" | "json"; readonly level: string; readonly colors: boolean }
  /** Connection tracing (`[telemetry.traces]`): the ping sampling ratio; undefined when traces are off. */
  readonly tracing: { readonly samplingRatio: number } | undefined
  /** Whether test-only messages (Crash) are honoured. */
  readonly testHooks: boolean
  /** The main thread's monotonic clock origin (monotonicClock.ts): the worker's clock runs on it. */
  readonly clockOrigin: bigint
}

/** One log line of a worker, as its logger saw it. */
export interface WorkerLogRecord {
  /** The level's label (INFO, WARN, ...). */
  readonly level: string
  readonly message: string
  /** The line's fields in order: the connection's (conn, ip, server), then the annotations (worker, ...). */
  readonly fields: ReadonlyArray<readonly [string, unknown]>
  readonly cause: string | undefined
  /** When the worker logged it (epoch ms): the main thread writes it up to a batch later, or later still when busy. */
  readonly at: number
}
