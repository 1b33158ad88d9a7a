/**
 * The opening phase: the PROXY protocol header (when `receive_proxy_protocol`), the flood bound on handshakes in
 * progress, the global `[ip_filter]` and IP bans, then the handshake or a legacy (pre-1.7) ping. Refusals are said
 * here; a pre-1.7 login is kicked here.
 *
 * It comes in two parts. `read` runs on plain callbacks, before the connection has a fiber, in one object per
 * connection (OpeningRead): most connections of a flood (garbage, stalled handshakes) end there, and a fiber with its
 * runtime is ten times what such a connection costs otherwise (docs/benchmarks.md, "Memory under a flood"). `screen`
 * runs in the connection's fiber once the handshake has arrived: the refusals, which log and write.
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import {
  decodeHandshakeBody,
  MAX_HANDSHAKE_FRAME_BYTES,
  NEXT_STATE_STATUS,
  splitAddress
} from "../../protocol/handshake.js"
import { readFrame } from "../../protocol/frame.js"
import { detectLegacy, encodeLegacyKick } from "../../protocol/legacy.js"
import type { ProtocolError } from "../../protocol/ProtocolError.js"
import { decoding } from "../../protocol/result.js"
import { type ProxyHeaderRead, readProxyHeader } from "../../protocol/proxyProtocol.js"
import { readVarInt } from "../../protocol/varint.js"
import { banMessage } from "../bans/message.js"
import type { BanDataPlane } from "../BanStore.js"
import type { ConfigSnapshot } from "../ConfigStore.js"
import type { IpFilterDataPlane } from "../IpFilter.js"
import type { ConnectionLogFields } from "../log/connectionFields.js"
import type { RefusalLines } from "../log/refusalLines.js"
import { done, failWith, needMore, type Parse, type ReadClient, type ReadError, SocketReader } from "../net/SocketReader.js"
import type { HandshakeOwner, RateLimiterDataPlane } from "../RateLimiter.js"
import type { HandshakeKind, RejectReason, StatsDataPlane } from "../Stats.js"
import { type ConnectionTrace, traceRefusal, type TracingDataPlane } from "../telemetry/connectionTrace.js"
import { closeWith, refuse } from "./closing.js"
import { type Connection, noRelease, normaliseHeaderIp, type Peer, peerOn, type Release, socketPeer } from "./connection.js"
import { MESSAGES } from "./messages.js"
import type { Opened, SettledOpening } from "./phases.js"

/** Time a client has for its PROXY header and handshake, and for each packet before the relay (ms). */
export const HANDSHAKE_TIMEOUT_MS = 5_000
/** A lone `FE` or `FE 01` is a legacy ping if nothing follows within this time (ms). */
export const LEGACY_PING_WAIT_MS = 300
const MAX_PROXY_HEADER_BYTES = 16 + 4096

type Opening = SettledOpening | { readonly _tag: "MaybeLegacyPing"; readonly ping: Extract<SettledOpening, { _tag: "LegacyPing" }>["ping"] }

const parseOpening = (buffer: Buffer): Parse<Opening> => {
  const legacy = detectLegacy(buffer)
  switch (legacy._tag) {
    case "NeedMore":
      return needMore
    case "Invalid":
      return failWith(legacy.reason)
    case "Login":
      return done({ _tag: "LegacyLogin" }, 0)
    case "Ping":
      return done({ _tag: "LegacyPing", ping: legacy.ping }, buffer.length)
    case "MaybePing":
      return done({ _tag: "MaybeLegacyPing", ping: legacy.ping }, 0)
    case "Modern": {
      // Reject as soon as the packet id shows this is no handshake, instead of waiting for a frame that never ends.
      const length = readVarInt(buffer)
      if (length._tag === "Value" && buffer.length > length.size && buffer[length.size] !== 0x00) {
        return failWith(`expected a handshake, got packet ${buffer[length.size]}`)
      }
      const frame = readFrame(buffer, 0, MAX_HANDSHAKE_FRAME_BYTES)
      if (frame._tag === "Incomplete") return needMore
      if (frame._tag === "Invalid") return failWith(`bad handshake: ${frame.reason}`)
      if (frame.packetId !== 0x00) return failWith(`expected a handshake, got packet ${frame.packetId}`)
      const handshake = decoding("bad handshake", () => decodeHandshakeBody(buffer.subarray(frame.bodyStart, frame.end)))
      if (handshake._tag === "Invalid") return failWith(handshake.reason)
      return done({ _tag: "Modern", handshake: handshake.value, raw: buffer.subarray(0, frame.end) }, frame.end)
    }
  }
}

/** What the opening phase reads and checks with. */
export interface OpeningServices {
  readonly rateLimiter: RateLimiterDataPlane
  readonly ipFilter: IpFilterDataPlane
  readonly bans: BanDataPlane
  readonly clock: Clock.Clock
  readonly stats: StatsDataPlane
  readonly tracing: TracingDataPlane | undefined
  readonly refusals: RefusalLines
}

/** The opening's reads done: the client, its handshake slot, its first bytes, and what the filter and bans say. */
export interface Arrived {
  readonly connection: Connection
  readonly reader: SocketReader
  readonly peer: Peer
  readonly snapshot: ConfigSnapshot
  readonly slot: Release
  readonly opening: SettledOpening
  /** The global `[ip_filter]`'s verdict on the client's address. */
  readonly globallyAllowed: boolean
  readonly ipBan: ReturnType<BanDataPlane["ipBan"]>
}

/** How an opening ended before its handshake arrived; the connection is not closed yet. */
export type OpeningEnd =
  /** Bad bytes, a timeout, the peer gone (or closed because a newer handshake took its place). */
  | { readonly _tag: "Failed"; readonly error: ReadError }
  /** Refused for the flood bound: too many handshakes in progress (already counted). */
  | { readonly _tag: "Flood" }

const flooded: OpeningEnd = { _tag: "Flood" }

/** Where an opening reports how it went: exactly one of the two, once. */
export interface OpeningSink {
  /** The handshake is here; the slot goes with it. */
  arrived(arrived: Arrived): void
  /** It ended before; the slot is given back. */
  ended(end: OpeningEnd): void
}

export interface OpeningPhase {
  /** Reads the PROXY header, takes the handshake slot and reads the handshake, on callbacks, then tells `sink`. */
  readonly read: (
    connection: Connection,
    snapshot: ConfigSnapshot,
    fields: ConnectionLogFields,
    /** When the connection was accepted (`performance.now()`). */
    accepted: number,
    sink: OpeningSink
  ) => void
  /** The refusals (global filter, IP ban, pre-1.7 login), in the connection's fiber; the slot is given back unless handed on. */
  readonly screen: (arrived: Arrived) => Effect.Effect<Opened | undefined>
}

const kindOf = (opening: SettledOpening): HandshakeKind =>
  opening._tag === "Modern" ? (opening.handshake.nextState === NEXT_STATE_STATUS ? "status" : "login") : opening._tag === "LegacyPing" ? "legacy_status" : "login"

/**
 * A refused login is worth an info line (while few come: log/refusalLines.ts); a refused ping only a debug one: pings
 * are what a banned or filtered address can send without end, and each would otherwise add a line to the log (the
 * stats count them all the same).
 */
const logRefusal = (lines: RefusalLines, opening: SettledOpening, reason: RejectReason, message: string): Effect.Effect<void> =>
  kindOf(opening) === "login" ? lines.say(reason, "info", message) : Effect.logDebug(message)

/** A connection refused or evicted for the handshake flood bound: counted, and its trace says why. */
const countFloodRefusal = (stats: StatsDataPlane, trace: ConnectionTrace | undefined): void => {
  stats.rejected("flood")
  traceRefusal(trace, "flood")
}

type ProxyHeader = Extract<ProxyHeaderRead, { readonly _tag: "Header" }>

const parseProxyHeader = (buffer: Buffer): Parse<ProxyHeader> => {
  const read = readProxyHeader(buffer)
  if (read._tag === "Incomplete") return needMore
  if (read._tag === "Invalid") return failWith(read.reason)
  return done(read, read.length)
}

/** The client as the PROXY protocol header names it (exported for its test). */
export const proxyPeer = (connection: Connection, header: ProxyHeader): Peer => {
  const { source, destination } = header
  if (source === undefined) return socketPeer(connection.socket) // LOCAL: a health check of the load balancer itself
  const clientIp = normaliseHeaderIp(source.address)
  // Never the socket's own remote address (the load balancer's): a getpeername call was a seventh of what a flood
  // connection cost.
  return destination === undefined
    ? peerOn(connection.socket, clientIp, source.port)
    : { clientIp, clientPort: source.port, localIp: normaliseHeaderIp(destination.address), localPort: destination.port }
}

/** What an opening reads and checks with, and how it records a handshake it has read. */
interface OpeningContext extends OpeningServices {
  readonly handshakeRead: (connection: Connection, peer: Peer, opening: SettledOpening, accepted: number) => void
}

/** The opening's reads, one after the other. */
type Step = "proxyHeader" | "handshake" | "legacyOrMore"

type LegacyPing = Extract<SettledOpening, { _tag: "LegacyPing" }>["ping"]

/**
 * One connection's opening on callbacks. Its state and its steps live in this one object, the client of every read
 * (SocketReader.readFor) and the owner of its handshake place: a flood keeps a thousand of them waiting, and a
 * closure per step made them about a third larger.
 */
class OpeningRead implements ReadClient<ProxyHeader | Opening, ProtocolError>, HandshakeOwner {
  private readonly reader: SocketReader
  private step: Step = "handshake"
  private peer: Peer | undefined = undefined
  private slot: Release = noRelease
  private globallyAllowed = true
  private ipBan: ReturnType<BanDataPlane["ipBan"]> = undefined
  /** A lone `FE` or `FE 01`, and how many bytes were buffered then: more may turn it into something else. */
  private maybePing: LegacyPing | undefined = undefined
  private seen = 0

  constructor(
    private readonly context: OpeningContext,
    private readonly connection: Connection,
    private readonly snapshot: ConfigSnapshot,
    private readonly fields: ConnectionLogFields,
    private readonly accepted: number,
    private readonly sink: OpeningSink
  ) {
    this.reader = new SocketReader(connection.socket)
  }

  start(): void {
    if (!this.snapshot.global.receive_proxy_protocol) return this.withPeer(socketPeer(this.connection.socket))
    this.step = "proxyHeader"
    this.reader.readFor("the PROXY protocol header", MAX_PROXY_HEADER_BYTES, HANDSHAKE_TIMEOUT_MS, this)
  }

  parse(buffer: Buffer): Parse<ProxyHeader | Opening> {
    switch (this.step) {
      case "proxyHeader":
        return parseProxyHeader(buffer)
      case "handshake":
        return parseOpening(buffer)
      case "legacyOrMore":
        return buffer.length > this.seen ? parseOpening(buffer) : needMore
    }
  }

  readDone(value: ProxyHeader | Opening): void {
    if (value._tag === "Header") return this.withPeer(proxyPeer(this.connection, value))
    // `FE` or `FE 01` alone: a legacy ping, unless more bytes arrive shortly that make it something else (a 1.6 ping,
    // or a modern frame). `FE` can become `FE 01`, so this can wait twice.
    if (value._tag !== "MaybeLegacyPing") return this.settled(value)
    this.maybePing = value.ping
    this.seen = this.reader.peekBuffered().length
    this.step = "legacyOrMore"
    this.reader.readFor("the handshake", MAX_HANDSHAKE_FRAME_BYTES, LEGACY_PING_WAIT_MS, this)
  }

  readFailed(error: ReadError): void {
    switch (this.step) {
      case "proxyHeader":
        return this.sink.ended({ _tag: "Failed", error })
      case "handshake":
        this.slot()
        return this.sink.ended({ _tag: "Failed", error })
      case "legacyOrMore":
        // A 1.6 ping under way (`FE 01 FA` and part of the rest, sent in pieces): it gets the time of a handshake.
        if (error._tag === "ReadTimeout" && detectLegacy(this.reader.peekBuffered())._tag === "NeedMore") {
          this.step = "handshake"
          return this.reader.readFor("the handshake", MAX_HANDSHAKE_FRAME_BYTES, HANDSHAKE_TIMEOUT_MS, this)
        }
        // Nothing more came (or the client stopped sending): it was the legacy ping.
        this.reader.takeBuffered()
        return this.settled({ _tag: "LegacyPing", ping: this.maybePing as LegacyPing })
    }
  }

  /** Gave way to a newcomer under the flood bound. */
  evicted(): void {
    countFloodRefusal(this.context.stats, this.connection.trace)
    this.connection.socket.destroy()
  }

  private withPeer(peer: Peer): void {
    const { context, connection } = this
    const ip = peer.clientIp
    this.peer = peer
    this.fields.ip = ip
    const trace = connection.trace
    if (trace !== undefined) {
      trace.clientAddress = ip
      trace.clientPort = peer.clientPort
    }
    // Should this connection have waited longest for its client when every place is taken, it gives way.
    const place = context.rateLimiter.enterHandshake(ip, this)
    if (place === undefined) {
      countFloodRefusal(context.stats, trace)
      return this.sink.ended(flooded)
    }
    this.reader.onWaiting = place
    this.slot = place.release
    // Decided now, said once the handshake shows whether the client is a login (which gets the reason) or a ping.
    this.globallyAllowed = context.ipFilter.allowedGlobally(this.snapshot, ip)
    this.ipBan = this.globallyAllowed ? context.bans.ipBan(ip, context.clock.unsafeCurrentTimeMillis()) : undefined
    this.step = "handshake"
    this.reader.readFor("the handshake", MAX_HANDSHAKE_FRAME_BYTES, HANDSHAKE_TIMEOUT_MS, this)
  }

  private settled(opening: SettledOpening): void {
    const { connection, reader, snapshot, slot, globallyAllowed, ipBan } = this
    const peer = this.peer as Peer
    this.context.handshakeRead(connection, peer, opening, this.accepted)
    this.sink.arrived({ connection, reader, peer, snapshot, slot, opening, globallyAllowed, ipBan })
  }
}

export const makeOpening = (services: OpeningServices): OpeningPhase => {
  const { clock, stats, tracing, refusals } = services
  /**
   * What the handshake says, counted, and on the trace: every login is traced, so one that was not sampled at the
   * connection's start gets its record now.
   */
  const handshakeRead = (connection: Connection, peer: Peer, opening: SettledOpening, accepted: number): void => {
    const now = performance.now()
    const kind = kindOf(opening)
    stats.handshake(kind, now - accepted)
    if (tracing === undefined) return
    let trace: ConnectionTrace | undefined = connection.trace
    if (trace === undefined) {
      if (kind !== "login") return
      trace = connection.trace = tracing.begin(connection.id, accepted)
      trace.clientAddress = peer.clientIp
      trace.clientPort = peer.clientPort
    }
    trace.handshakeEnd = now
    trace.handshake = kind
    if (opening._tag === "Modern") {
      trace.domain = splitAddress(opening.handshake.address).host
      trace.domainPort = opening.handshake.port
      trace.protocolVersion = opening.handshake.protocolVersion
    } else if (opening._tag === "LegacyPing" && opening.ping._tag === "V1_6") {
      trace.domain = splitAddress(opening.ping.host).host
      trace.domainPort = opening.ping.port
      trace.protocolVersion = opening.ping.protocolVersion
    }
  }

  const context: OpeningContext = { ...services, handshakeRead }

  const read: OpeningPhase["read"] = (connection, snapshot, fields, accepted, sink) =>
    new OpeningRead(context, connection, snapshot, fields, accepted, sink).start()

  const screen = (arrived: Arrived): Effect.Effect<Opened | undefined> => {
    const { connection, opening, slot } = arrived
    const socket = connection.socket
    let refusal: Effect.Effect<void>
    if (!arrived.globallyAllowed) {
      stats.rejected("ip_filter")
      traceRefusal(connection.trace, "ip_filter")
      refusal = Effect.zipRight(logRefusal(refusals, opening, "ip_filter", "refused by the global [ip_filter]"), refuse(socket, opening, MESSAGES.notAllowed))
    } else if (arrived.ipBan !== undefined) {
      const ipBan = arrived.ipBan
      stats.rejected("banned")
      traceRefusal(connection.trace, "banned")
      refusal = Effect.zipRight(
        logRefusal(refusals, opening, "banned", `refused: the address is banned (${ipBan.reason})`),
        Effect.suspend(() => refuse(socket, opening, banMessage(ipBan, Math.floor(clock.unsafeCurrentTimeMillis() / 1000))))
      )
    } else if (opening._tag === "LegacyLogin") {
      traceRefusal(connection.trace, "outdated_client")
      refusal = Effect.zipRight(Effect.logDebug("pre-1.7 login refused"), closeWith(socket, encodeLegacyKick(MESSAGES.outdatedClient)))
    } else {
      return Effect.succeed({ connection, reader: arrived.reader, peer: arrived.peer, snapshot: arrived.snapshot, slot, opening })
    }
    return Effect.as(Effect.ensuring(refusal, Effect.sync(slot)), undefined)
  }

  return { read, screen }
}
