/**
 * The opening phase: the PROXY protocol header (when `receive_proxy_protocol`), the flood bound on handshakes in
 * progress, the global `[ip_filter]` and IP bans, then the handshake or a legacy (pre-1.7) ping. Refusals are said
 * here; a pre-1.7 login is kicked here.
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import {
  decodeHandshakeBody,
  MAX_HANDSHAKE_FRAME_BYTES,
  NEXT_STATE_STATUS,
  splitAddress
} from "../../protocol/handshake.js"
import { readFrame } from "../../protocol/frame.js"
import { detectLegacy, encodeLegacyKick } from "../../protocol/legacy.js"
import { decoding } from "../../protocol/result.js"
import { readProxyHeader } from "../../protocol/proxyProtocol.js"
import { readVarInt } from "../../protocol/varint.js"
import { banMessage } from "../bans/message.js"
import type { BanDataPlane } from "../BanStore.js"
import type { ConfigSnapshot } from "../ConfigStore.js"
import type { IpFilterDataPlane } from "../IpFilter.js"
import type { ConnectionLogFields } from "../log/connectionFields.js"
import { done, failWith, needMore, type Parse, type ReadError, SocketReader } from "../net/SocketReader.js"
import type { RateLimiterDataPlane } from "../RateLimiter.js"
import type { HandshakeKind, StatsDataPlane } from "../Stats.js"
import { type ConnectionTrace, traceRefusal, type TracingDataPlane } from "../telemetry/connectionTrace.js"
import { closeWith, refuse } from "./closing.js"
import { type Connection, normaliseIp, type Peer, type Release, socketPeer } from "./connection.js"
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
}

export type OpeningPhase = (
  connection: Connection,
  snapshot: ConfigSnapshot,
  fields: ConnectionLogFields,
  /** When the connection was accepted (`performance.now()`). */
  accepted: number
) => Effect.Effect<Opened | undefined, ReadError>

const kindOf = (opening: SettledOpening): HandshakeKind =>
  opening._tag === "Modern" ? (opening.handshake.nextState === NEXT_STATE_STATUS ? "status" : "login") : opening._tag === "LegacyPing" ? "legacy_status" : "login"

/** A connection refused or evicted for the handshake flood bound: counted, and its trace says why. */
const countFloodRefusal = (stats: StatsDataPlane, trace: ConnectionTrace | undefined): void => {
  stats.rejected("flood")
  traceRefusal(trace, "flood")
}

export const makeOpening = ({ rateLimiter, ipFilter, bans, clock, stats, tracing }: OpeningServices): OpeningPhase => {
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
    }
  }

  /** The client as the PROXY protocol header names it. */
  const readProxyPeer = (connection: Connection, reader: SocketReader): Effect.Effect<Peer, ReadError> =>
    Effect.map(
      reader.read("the PROXY protocol header", MAX_PROXY_HEADER_BYTES, HANDSHAKE_TIMEOUT_MS, (buffer) => {
        const read = readProxyHeader(buffer)
        if (read._tag === "Incomplete") return needMore
        if (read._tag === "Invalid") return failWith(read.reason)
        return done(read, read.length)
      }),
      (header): Peer => {
        const own = socketPeer(connection.socket)
        if (header.source === undefined) return own // LOCAL: a health check of the load balancer itself
        return {
          clientIp: normaliseIp(header.source.address),
          clientPort: header.source.port,
          localIp: header.destination === undefined ? own.localIp : normaliseIp(header.destination.address),
          localPort: header.destination?.port ?? own.localPort
        }
      }
    )

  const readOpening = (reader: SocketReader): Effect.Effect<SettledOpening, ReadError> =>
    Effect.flatMap(reader.read("the handshake", MAX_HANDSHAKE_FRAME_BYTES, HANDSHAKE_TIMEOUT_MS, parseOpening), (opening) =>
      opening._tag === "MaybeLegacyPing" ? settleLegacyPing(reader, opening) : Effect.succeed(opening)
    )

  const settleLegacyPing = (reader: SocketReader, first: Opening): Effect.Effect<SettledOpening, ReadError> =>
    Effect.gen(function* () {
      let opening = first
      // `FE` or `FE 01` alone: a legacy ping, unless more bytes arrive shortly that make it something else
      // (a 1.6 ping, or a modern frame). `FE` can become `FE 01`, so this can wait twice.
      while (opening._tag === "MaybeLegacyPing") {
        const seen = reader.peekBuffered().length
        const more = yield* reader
          .read("the handshake", MAX_HANDSHAKE_FRAME_BYTES, LEGACY_PING_WAIT_MS, (buffer) =>
            buffer.length > seen ? parseOpening(buffer) : needMore
          )
          .pipe(Effect.option)
        if (Option.isNone(more)) {
          reader.takeBuffered()
          return { _tag: "LegacyPing" as const, ping: opening.ping }
        }
        opening = more.value
      }
      return opening
    })

  /** The flood bound, the global filter and IP bans, then the handshake; the slot is given back unless handed on. */
  const open = (connection: Connection, reader: SocketReader, peer: Peer, snapshot: ConfigSnapshot, slot: Release, accepted: number) => {
    const socket = connection.socket
    const ip = peer.clientIp
    const globallyAllowed = ipFilter.allowedGlobally(snapshot, ip)
    const ipBan = globallyAllowed ? bans.ipBan(ip, clock.unsafeCurrentTimeMillis()) : undefined
    // The handshake is still read, only to tell a login (which gets the reason) from a ping (closed).
    return Effect.flatMap(readOpening(reader), (opening): Effect.Effect<Opened | undefined> => {
      handshakeRead(connection, peer, opening, accepted)
      if (!globallyAllowed) {
        stats.rejected("ip_filter")
        traceRefusal(connection.trace, "ip_filter")
        return Effect.as(Effect.zipRight(Effect.logInfo("refused by the global [ip_filter]"), refuse(socket, opening, MESSAGES.notAllowed)), undefined)
      }
      if (ipBan !== undefined) {
        stats.rejected("banned")
        traceRefusal(connection.trace, "banned")
        return Effect.as(
          Effect.zipRight(
            Effect.logInfo(`refused: the address is banned (${ipBan.reason})`),
            Effect.suspend(() => refuse(socket, opening, banMessage(ipBan, Math.floor(clock.unsafeCurrentTimeMillis() / 1000))))
          ),
          undefined
        )
      }
      if (opening._tag === "LegacyLogin") {
        traceRefusal(connection.trace, "outdated_client")
        return Effect.as(
          Effect.zipRight(Effect.logDebug("pre-1.7 login refused"), closeWith(socket, encodeLegacyKick(MESSAGES.outdatedClient))),
          undefined
        )
      }
      return Effect.succeed({ connection, reader, peer, snapshot, slot, opening })
    }).pipe(Effect.onExit((exit) => (Exit.isSuccess(exit) && exit.value !== undefined ? Effect.void : Effect.sync(slot))))
  }

  return (connection, snapshot, fields, accepted) => {
    const reader = new SocketReader(connection.socket)
    const peer = snapshot.global.receive_proxy_protocol ? readProxyPeer(connection, reader) : Effect.succeed(socketPeer(connection.socket))
    return Effect.flatMap(peer, (found) => {
      fields.ip = found.clientIp
      const trace = connection.trace
      if (trace !== undefined) {
        trace.clientAddress = found.clientIp
        trace.clientPort = found.clientPort
      }
      // Should this handshake be the oldest when every place is taken, it gives way to a newer one.
      const slot = rateLimiter.enterHandshake(found.clientIp, () => {
        countFloodRefusal(stats, trace)
        connection.socket.destroy()
      })
      if (slot === undefined) {
        countFloodRefusal(stats, trace)
        return Effect.as(
          Effect.zipRight(Effect.logDebug("too many handshakes in progress: closed"), closeWith(connection.socket, undefined)),
          undefined
        )
      }
      return open(connection, reader, found, snapshot, slot, accepted)
    })
  }
}
