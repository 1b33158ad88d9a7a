/**
 * Session: the one place that knows the order of a connection's life, from the first byte to the relay.
 * Every step is a call into a service; data moves forward only.
 *
 *   PROXY header -> handshake (or legacy ping / login) -> route -> status answer
 *                                                       -> Login Start -> checks -> dial -> replay -> relay
 */
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import ipaddr from "ipaddr.js"
import type { Socket } from "node:net"
import type { ServerState } from "../schema/common.js"
import type { ServerDefinition } from "../schema/decode.js"
import type { BackendAddress } from "../schema/ServerConfig.js"
import { formatHostPort } from "../schema/HostPort.js"
import { readFrame } from "../protocol/frame.js"
import { readVarInt } from "../protocol/varint.js"
import {
  decodeHandshakeBody,
  type Handshake,
  MAX_HANDSHAKE_FRAME_BYTES,
  NEXT_STATE_STATUS,
  splitAddress
} from "../protocol/handshake.js"
import { detectLegacy, encodeLegacyKick, encodeLegacyPingResponse, type LegacyPing } from "../protocol/legacy.js"
import { decodeLoginStartBody, encodeLoginDisconnect, type LoginStart, MAX_LOGIN_START_FRAME_BYTES } from "../protocol/login.js"
import { ProtocolError } from "../protocol/ProtocolError.js"
import { encodeProxyV2, readProxyHeader } from "../protocol/proxyProtocol.js"
import { encodePongFromBody, encodeStatusResponse } from "../protocol/status.js"
import { Backend } from "./Backend.js"
import { BanStore, banMessage } from "./BanStore.js"
import { Balancer } from "./Balancer.js"
import { type ConfigSnapshot, ConfigStore } from "./ConfigStore.js"
import { Forwarding, forwardingModeOf } from "./Forwarding.js"
import { PlayerRegistry, type SessionLease } from "./PlayerRegistry.js"
import { IpFilter } from "./IpFilter.js"
import { RateLimiter } from "./RateLimiter.js"
import { type ByteMeter, Relay, type RelayOutcome, relayTimeouts } from "./Relay.js"
import { Router } from "./Router.js"
import { ServerManager } from "./ServerManager.js"
import { type ConnectionLogFields, currentConnectionLog } from "./session/logFields.js"
import { MESSAGES } from "./session/messages.js"
import { done, failParse, needMore, type Parse, SocketReader, writeAll } from "./session/SocketReader.js"
import { StatusService } from "./StatusService.js"
import { toLegacyStatus } from "./status/motd.js"

/** Time a client has for its PROXY header and handshake, and for each packet before the relay (ms). */
export const HANDSHAKE_TIMEOUT_MS = 5_000
/** A lone `FE` or `FE 01` is a legacy ping if nothing follows within this time (ms). */
export const LEGACY_PING_WAIT_MS = 300
/** Protocol asked of a backend on behalf of a pre-1.7 client (any modern one gives the same answer). */
export const LEGACY_STATUS_PROTOCOL = 47
const MAX_PROXY_HEADER_BYTES = 16 + 4096
/** How long a closing connection may take to flush its last message (ms). */
const CLOSE_FLUSH_TIMEOUT_MS = 2_000

export interface Connection {
  readonly id: number
  readonly socket: Socket
  /** Set once a relay owns the socket: the end of the session must not close it then. */
  relayed?: boolean
}

interface Peer {
  readonly clientIp: string
  readonly clientPort: number
  readonly localIp: string
  readonly localPort: number
}

/** What a connection gives back when it ends, all in one finalizer. */
interface Holdings {
  /** The connection's handshake slot (the flood bound); idempotent, and given back early once Login Start is read. */
  releaseSlot: () => void
  /** Leases (player registry, balancer); a relay that takes the connection over releases them itself. */
  readonly leases: Array<() => void>
  /** The backend connection, closed with the session unless a relay took it over. */
  backend?: Socket
}

/** A connection whose handshake routed it to a server. */
interface Routed {
  readonly connection: Connection
  readonly reader: SocketReader
  readonly handshake: Handshake
  /** The handshake frame as the client sent it. */
  readonly handshakeRaw: Buffer
  readonly server: ServerDefinition
  readonly peer: Peer
  readonly snapshot: ConfigSnapshot
  readonly holdings: Holdings
}

/** A login that passed its checks: what the dial and the relay need. */
interface Joining {
  readonly routed: Routed
  readonly start: { readonly value: LoginStart; readonly raw: Buffer }
  /** The player as log lines name it. */
  readonly who: string
  readonly lease: SessionLease
}

type Opening =
  | { readonly _tag: "Modern"; readonly handshake: Handshake; readonly raw: Buffer }
  | { readonly _tag: "LegacyPing"; readonly ping: LegacyPing }
  | { readonly _tag: "MaybeLegacyPing"; readonly ping: LegacyPing }
  | { readonly _tag: "LegacyLogin" }

const noop = () => {}

/** An opening once a lone `FE` has had its chance to grow into something else. */
type SettledOpening = Exclude<Opening, { readonly _tag: "MaybeLegacyPing" }>

/** Normalises an address as Node reports it (`::ffff:1.2.3.4` becomes `1.2.3.4`). */
export const normaliseIp = (address: string | undefined): string => {
  if (address === undefined) return "unknown"
  // The common cases need no parsing: a plain IPv4 address, or an IPv6 one that is not IPv4-mapped.
  if (!address.includes(":")) return address
  if (!address.startsWith("::ffff:") && !address.includes("%")) return address
  try {
    return ipaddr.process(address).toString()
  } catch {
    return address
  }
}

const parseOpening = (buffer: Buffer): Parse<Opening> => {
  const legacy = detectLegacy(buffer)
  switch (legacy._tag) {
    case "NeedMore":
      return needMore
    case "Invalid":
      return failParse(new ProtocolError(legacy.reason))
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
        return failParse(new ProtocolError(`expected a handshake, got packet ${buffer[length.size]}`))
      }
      const frame = readFrame(buffer, 0, MAX_HANDSHAKE_FRAME_BYTES)
      if (frame._tag === "Incomplete") return needMore
      if (frame._tag === "Invalid") return failParse(new ProtocolError(`bad handshake: ${frame.reason}`))
      if (frame.packetId !== 0x00) return failParse(new ProtocolError(`expected a handshake, got packet ${frame.packetId}`))
      try {
        const handshake = decodeHandshakeBody(buffer.subarray(frame.bodyStart, frame.end))
        return done({ _tag: "Modern", handshake, raw: buffer.subarray(0, frame.end) }, frame.end)
      } catch (error) {
        return failParse(error as Error)
      }
    }
  }
}

/** Parses one uncompressed frame with the expected id; the frame's bytes are returned with the decoded value. */
const packet =
  <A>(expectedId: number, maxBytes: number, decode: (body: Buffer) => A) =>
  (buffer: Buffer): Parse<{ readonly value: A; readonly raw: Buffer }> => {
    const frame = readFrame(buffer, 0, maxBytes)
    if (frame._tag === "Incomplete") return needMore
    if (frame._tag === "Invalid") return failParse(new ProtocolError(frame.reason))
    if (frame.packetId !== expectedId) {
      return failParse(new ProtocolError(`expected packet ${expectedId}, got ${frame.packetId}`))
    }
    try {
      return done({ value: decode(buffer.subarray(frame.bodyStart, frame.end)), raw: buffer.subarray(0, frame.end) }, frame.end)
    } catch (error) {
      return failParse(error as Error)
    }
  }

/** Writes a last message, half-closes, and waits (bounded by a plain timer) for it to leave. */
const closeWith = (socket: Socket, data: Buffer | undefined) =>
  Effect.async<void>((resume) => {
    if (socket.destroyed) return resume(Effect.void)
    const finish = () => {
      clearTimeout(timer)
      socket.off("close", finish)
      socket.destroy()
      resume(Effect.void)
    }
    const timer = setTimeout(finish, CLOSE_FLUSH_TIMEOUT_MS)
    socket.once("close", finish)
    if (data === undefined) socket.end()
    else socket.end(data)
    return Effect.sync(() => {
      clearTimeout(timer)
      socket.destroy()
    })
  })

const disconnect = (socket: Socket, message: string) => closeWith(socket, encodeLoginDisconnect(message))

const formatBytes = (bytes: number): string =>
  bytes < 1024 ? `${bytes} B` : bytes < 1048576 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1048576).toFixed(1)} MiB`

/**
 * Bad input and vanished peers are everyday events (scanners, timeouts): one debug line with the reason.
 * Anything else is a bug and is logged as an error with its cause; interruption (shutdown) is silent.
 */
const logConnectionFailure = (cause: Cause.Cause<unknown>) => {
  if (Cause.isInterruptedOnly(cause)) return Effect.void
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure) && !Cause.isDie(cause)) {
    const error = failure.value
    return Effect.logDebug(`connection closed: ${error instanceof Error ? error.message : String(error)}`)
  }
  return Effect.logError("connection failed unexpectedly", cause)
}

export class Session extends Effect.Service<Session>()("portal/Session", {
  effect: Effect.gen(function* () {
    const store = yield* ConfigStore
    const router = yield* Router
    const status = yield* StatusService
    const backend = yield* Backend
    const balancer = yield* Balancer
    const forwarding = yield* Forwarding
    const registry = yield* PlayerRegistry
    const relay = yield* Relay
    const rateLimiter = yield* RateLimiter
    const ipFilter = yield* IpFilter
    const bans = yield* BanStore
    const manager = yield* ServerManager
    const runDetached = Runtime.runFork(yield* Effect.runtime<never>())
    const clock = yield* Effect.clock
    // The "left" line is logged from outside any fiber: skip forking one for it when info lines are filtered.
    const infoLogged = LogLevel.greaterThanEqual(LogLevel.Info, yield* FiberRef.get(FiberRef.currentMinimumLogLevel))

    /** The peer as the socket shows it; the local side is looked up only if something asks (a system call). */
    const ownPeer = (socket: Socket): Peer => ({
      clientIp: normaliseIp(socket.remoteAddress),
      clientPort: socket.remotePort ?? 0,
      get localIp() {
        return normaliseIp(socket.localAddress)
      },
      get localPort() {
        return socket.localPort ?? 0
      }
    })

    /** The client as the PROXY protocol header names it. */
    const readProxyPeer = (connection: Connection, reader: SocketReader): Effect.Effect<Peer, Error> =>
      Effect.map(
        reader.read("the PROXY protocol header", MAX_PROXY_HEADER_BYTES, HANDSHAKE_TIMEOUT_MS, (buffer) => {
          const read = readProxyHeader(buffer)
          if (read._tag === "Incomplete") return needMore
          if (read._tag === "Invalid") return failParse(new ProtocolError(read.reason))
          return done(read, read.length)
        }),
        (header): Peer => {
          const own = ownPeer(connection.socket)
          if (header.source === undefined) return own // LOCAL: a health check of the load balancer itself
          return {
            clientIp: normaliseIp(header.source.address),
            clientPort: header.source.port,
            localIp: header.destination === undefined ? own.localIp : normaliseIp(header.destination.address),
            localPort: header.destination?.port ?? own.localPort
          }
        }
      )

    const readOpening = (reader: SocketReader): Effect.Effect<SettledOpening, Error> =>
      Effect.flatMap(reader.read("the handshake", MAX_HANDSHAKE_FRAME_BYTES, HANDSHAKE_TIMEOUT_MS, parseOpening), (opening) =>
        opening._tag === "MaybeLegacyPing" ? settleLegacyPing(reader, opening) : Effect.succeed(opening)
      )

    const settleLegacyPing = (reader: SocketReader, first: Opening): Effect.Effect<SettledOpening, Error> =>
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

    const preambleFor = (server: ServerDefinition, peer: Peer): Buffer | undefined =>
      server.config.send_proxy_protocol
        ? encodeProxyV2({ address: peer.clientIp, port: peer.clientPort }, { address: peer.localIp, port: peer.localPort })
        : undefined

    const answerLegacyPing = (connection: Connection, ping: LegacyPing, peer: Peer, snapshot: ConfigSnapshot) =>
      Effect.gen(function* () {
        const host = ping._tag === "V1_6" ? splitAddress(ping.host).host : ""
        const server = host.length > 0 ? Option.getOrUndefined(router.resolveIn(snapshot, host)) : undefined
        if (server === undefined && snapshot.global.unknown_domain_behavior === "drop") {
          return yield* closeWith(connection.socket, undefined)
        }
        const handshake: Handshake = {
          protocolVersion: LEGACY_STATUS_PROTOCOL,
          address: ping._tag === "V1_6" ? ping.host : "",
          port: ping._tag === "V1_6" ? ping.port : 25565,
          nextState: NEXT_STATE_STATUS
        }
        const answer = yield* status.answer({
          server,
          state: server === undefined ? "online" : yield* stateOf(server),
          handshake,
          clientIp: peer.clientIp,
          preamble: server === undefined ? undefined : preambleFor(server, peer)
        })
        yield* Effect.logDebug(`legacy ${ping._tag} ping for "${host}" answered (${answer.source})`)
        yield* closeWith(connection.socket, encodeLegacyPingResponse(ping, toLegacyStatus(answer.json)))
      })

    /** A status ping: the status request, the answer, then the ping echoed as a pong. Plain combinators, as the login path. */
    const answerStatus = (
      connection: Connection,
      reader: SocketReader,
      handshake: Handshake,
      server: ServerDefinition | undefined,
      peer: Peer
    ): Effect.Effect<void, Error> =>
      reader.read("the status request", 64, HANDSHAKE_TIMEOUT_MS, packet(0x00, 16, () => undefined)).pipe(
        Effect.zipRight(server === undefined ? Effect.succeed<ServerState>("online") : stateOf(server)),
        Effect.flatMap((state) =>
          status.answer({
            server,
            state,
            handshake,
            clientIp: peer.clientIp,
            preamble: server === undefined ? undefined : preambleFor(server, peer)
          })
        ),
        Effect.tap((answer) => writeAll(connection.socket, encodeStatusResponse(answer.text))),
        Effect.flatMap((answer) => Effect.logDebug(`status ping answered (${answer.source}, ${answer.state})`)),
        Effect.zipRight(reader.read("the ping", 64, HANDSHAKE_TIMEOUT_MS, packet(0x01, 16, (body) => body)).pipe(Effect.option)),
        Effect.flatMap((ping) => closeWith(connection.socket, Option.isSome(ping) ? encodePongFromBody(ping.value.value) : undefined))
      )

    // The login path below is written with plain combinators rather than generators: a generator that has
    // suspended keeps what it references reachable through young-generation collections, and at connection rate
    // that carried every login's sockets and state into the old generation (docs/benchmarks.md, ninth round).

    const login = (routed: Routed): Effect.Effect<void, Error> =>
      Effect.flatMap(
        routed.reader.read(
          "Login Start",
          MAX_LOGIN_START_FRAME_BYTES,
          HANDSHAKE_TIMEOUT_MS,
          packet(0x00, MAX_LOGIN_START_FRAME_BYTES, (body) => decodeLoginStartBody(body, routed.handshake.protocolVersion))
        ),
        (start) => admit(routed, start)
      )

    /** The checks a login passes before Portal dials its backend, all synchronous. */
    const admit = (routed: Routed, start: { readonly value: LoginStart; readonly raw: Buffer }): Effect.Effect<void, Error> => {
      const { connection, handshake, server, peer, holdings } = routed
      const client = connection.socket
      // The handshake phase is over: this connection no longer counts against the flood bounds.
      holdings.releaseSlot()
      const player = start.value
      const who = `${player.name}${player.uuid !== undefined ? ` (${player.uuid})` : ""}`
      const now = clock.unsafeCurrentTimeMillis()
      const playerBan = bans.dataPlane.playerBan({ name: player.name, uuid: player.uuid }, now)
      if (playerBan !== undefined) {
        return Effect.zipRight(Effect.logInfo(`refused ${who}: banned (${playerBan.reason})`), disconnect(client, banMessage(playerBan, Math.floor(now / 1000))))
      }
      if (server.config.proxy_mode === "client_only") {
        return Effect.zipRight(
          Effect.logWarning(`refused ${who}: proxy_mode ${server.config.proxy_mode} is not available yet`),
          disconnect(client, MESSAGES.clientOnlyUnavailable)
        )
      }
      if (forwardingModeOf(server, routed.snapshot.global) === "modern") {
        return Effect.zipRight(Effect.logWarning(`refused ${who}: modern forwarding needs a packet proxy mode`), disconnect(client, MESSAGES.forwardingUnavailable))
      }
      const max = server.config.max_players
      if (max > 0 && registry.countForNow(server.id) >= max) {
        return Effect.zipRight(Effect.logInfo(`refused ${who}: ${server.id} is full (${max} players)`), disconnect(client, MESSAGES.serverFull))
      }
      const lease = registry.addAt(
        {
          id: connection.id,
          serverId: server.id,
          clientAddress: peer.clientIp,
          clientPort: peer.clientPort,
          protocolVersion: handshake.protocolVersion,
          name: player.name,
          uuid: player.uuid
        },
        now
      )
      // Released when the connection ends before the relay; the relay releases them once it has taken over.
      holdings.leases.push(lease.release)
      const joining: Joining = { routed, start, who, lease }
      if (!manager.manages(server.id)) return dial(joining)
      return Effect.flatMap(manager.ensureOnline(server.id), (wake) => {
        if (wake._tag === "Starting") {
          return Effect.zipRight(Effect.logInfo(`${who} asked to rejoin: ${server.id} is still starting`), disconnect(client, MESSAGES.starting))
        }
        if (wake._tag === "Unavailable") {
          return Effect.zipRight(
            Effect.logWarning(`${who} could not join ${server.id}: ${wake.state} (${wake.reason})`),
            disconnect(client, server.config.disconnect_message)
          )
        }
        return dial(joining)
      })
    }

    /** Connects to the backend, then asks Forwarding for the handshake the backend must see. */
    const dial = (joining: Joining): Effect.Effect<void, Error> => {
      const { server, snapshot, connection } = joining.routed
      const client = connection.socket
      return Effect.flatMap(Effect.either(backend.dial(server, snapshot.global)), (dialed) => {
        if (dialed._tag === "Left") {
          return Effect.zipRight(
            Effect.logWarning(`${joining.who} could not join ${server.id}: ${dialed.left.message}`),
            disconnect(client, server.config.disconnect_message)
          )
        }
        const { socket: backendSocket, address, failures } = dialed.right
        joining.routed.holdings.backend = backendSocket
        const handshakeBytes = Effect.suspend(() =>
          Effect.either(
            forwarding.backendHandshake({
              server,
              global: snapshot.global,
              handshake: joining.routed.handshake,
              raw: joining.routed.handshakeRaw,
              backend: address,
              clientIp: joining.routed.peer.clientIp,
              login: joining.start.value
            })
          )
        )
        const replayed = Effect.flatMap(handshakeBytes, (bytes) => {
          if (bytes._tag === "Left") {
            return Effect.zipRight(
              Effect.logError(`${joining.who} could not join ${server.id}: ${bytes.left.message}`),
              disconnect(client, MESSAGES.forwardingUnavailable)
            )
          }
          return join(joining, backendSocket, address, bytes.right)
        })
        return failures.length > 0 ? Effect.zipRight(backend.logFailures(server, failures), replayed) : replayed
      })
    }

    /** Replays the login to the backend and hands both sockets to the relay; the connection's fiber ends here. */
    const join = (joining: Joining, backendSocket: Socket, address: BackendAddress, handshakeBytes: Buffer): Effect.Effect<void> => {
      const { connection, server, peer, reader, holdings } = joining.routed
      const client = connection.socket
      const releases = holdings.leases
      releases.push(balancer.acquireNow(server.id, address))
      const preamble = preambleFor(server, peer)
      const replay = [handshakeBytes, joining.start.raw, reader.takeBuffered()]
      // Not waited for: the relay starts at once and reports a failed write as the backend's error.
      backendSocket.write(Buffer.concat(preamble === undefined ? replay : [preamble, ...replay]))

      const zeroCopy = server.config.proxy_mode === "zero_copy" && relay.zeroCopySupport().available
      const via = formatHostPort(address)
      // From here the relay owns both sockets and the leases, and this fiber ends.
      const startRelay = () => {
        const meters: { current: ByteMeter | undefined } = { current: undefined }
        connection.relayed = true
        const meter = relay.startNow({
          client,
          backend: backendSocket,
          timeouts: relayTimeouts(server.config.timeouts.read, server.config.timeouts.write),
          zeroCopy,
          onEnd: relayEnded(joining.who, server.id, { conn: connection.id, ip: peer.clientIp, server: server.id }, releases, meters)
        })
        meters.current = meter
        joining.lease.attachBackend(via, meter)
      }
      if (!infoLogged) {
        startRelay()
        return Effect.void
      }
      return Effect.map(Effect.logInfo(`${joining.who} joined ${server.id} via ${via}${zeroCopy ? " (zero_copy)" : ""}`), startRelay)
    }

    /**
     * What runs when a player's relay ends: gives the leases back and logs the "left" line. Made out here, from
     * just what it needs, because a function made inside the login would keep everything the login held (its
     * reader and buffers, the peer, the handshake) for as long as the player stays.
     */
    const relayEnded =
      (
        who: string,
        serverId: string,
        annotations: Record<string, unknown>,
        releases: ReadonlyArray<() => void>,
        meters: { readonly current: ByteMeter | undefined }
      ) => {
        const started = Date.now()
        return (outcome: RelayOutcome): void => {
          for (const release of releases) release()
          if (!infoLogged) return
          const bytesIn = meters.current?.bytesIn() ?? 0
          const bytesOut = meters.current?.bytesOut() ?? 0
          runDetached(
            Effect.logInfo(
              `${who} left ${serverId} after ${Duration.format(Duration.millis(Date.now() - started))} ` +
                `(${outcome.end.replace("_", " ")}${outcome.error !== undefined ? `: ${outcome.error}` : ""}; ` +
                `in ${formatBytes(bytesIn)}, out ${formatBytes(bytesOut)})`
            ).pipe(Effect.annotateLogs(annotations))
          )
        }
      }

    /**
     * The state a ping shows: the server manager's, and for a server that should be online but whose every address
     * fails its health check, `unreachable`.
     */
    const stateOf = (server: ServerDefinition): Effect.Effect<ServerState> =>
      Effect.flatMap(manager.stateOf(server.id), (state) =>
        state !== "online"
          ? Effect.succeed(state)
          : Effect.map(balancer.anyHealthy(server), (healthy): ServerState => (healthy ? state : "unreachable"))
      )

    /** Refuses a connection in the words its kind of client understands: a disconnect for logins, silence for pings. */
    const refuse = (socket: Socket, opening: Opening, message: string) => {
      switch (opening._tag) {
        case "Modern":
          return opening.handshake.nextState === NEXT_STATE_STATUS ? closeWith(socket, undefined) : disconnect(socket, message)
        case "LegacyLogin":
          return closeWith(socket, encodeLegacyKick(message.replace(/§./g, "")))
        default:
          return closeWith(socket, undefined)
      }
    }

    /**
     * Runs one connection until its relay starts (or it ends). Never fails: errors are logged at this boundary.
     * Runs in a fiber of its own (the Listener's FiberSet): its log annotations are not restored when it ends.
     */
    const handle = (connection: Connection): Effect.Effect<void> => {
      const socket = connection.socket
      const holdings: Holdings = { releaseSlot: noop, leases: [] }
      // The connection's log fields, filled in as they become known. The fiber ends with the connection, so nothing
      // needs restoring.
      const fields: ConnectionLogFields = { conn: connection.id }
      return Effect.flatMap(store.get, (snapshot) => {
        const reader = new SocketReader(socket)
        const peer = snapshot.global.receive_proxy_protocol ? readProxyPeer(connection, reader) : Effect.succeed(ownPeer(socket))
        return Effect.zipRight(
          FiberRef.set(currentConnectionLog, fields),
          Effect.flatMap(peer, (found) => {
            fields.ip = found.clientIp
            return serve(connection, reader, found, snapshot, holdings, fields)
          })
        )
      }).pipe(
        Effect.catchAllCause((cause) => Effect.zipRight(logConnectionFailure(cause), closeWith(socket, undefined))),
        // One finalizer gives everything back, and closes the sockets unless a relay took them over.
        Effect.ensuring(
          Effect.sync(() => {
            holdings.releaseSlot()
            if (connection.relayed) return
            for (const release of holdings.leases) release()
            holdings.backend?.destroy()
            socket.destroy()
          })
        )
      )
    }

    /** The flood bounds, the global filter and bans, then the handshake. */
    const serve = (
      connection: Connection,
      reader: SocketReader,
      peer: Peer,
      snapshot: ConfigSnapshot,
      holdings: Holdings,
      fields: ConnectionLogFields
    ): Effect.Effect<void, Error> => {
      const socket = connection.socket
      const ip = peer.clientIp
      const releaseSlot = rateLimiter.enterHandshakeNow(ip)
      if (releaseSlot === undefined) {
        return Effect.zipRight(Effect.logDebug("too many handshakes in progress: closed"), closeWith(socket, undefined))
      }
      holdings.releaseSlot = releaseSlot
      const globallyAllowed = ipFilter.allowedGlobally(snapshot, ip)
      const ipBan = globallyAllowed ? bans.dataPlane.ipBan(ip, clock.unsafeCurrentTimeMillis()) : undefined
      // The handshake is still read, only to tell a login (which gets the reason) from a ping (closed).
      return Effect.flatMap(readOpening(reader), (opening) => {
        if (!globallyAllowed) {
          return Effect.zipRight(Effect.logInfo("refused by the global [ip_filter]"), refuse(socket, opening, MESSAGES.notAllowed))
        }
        if (ipBan !== undefined) {
          return Effect.zipRight(
            Effect.logInfo(`refused: the address is banned (${ipBan.reason})`),
            Effect.suspend(() => refuse(socket, opening, banMessage(ipBan, Math.floor(clock.unsafeCurrentTimeMillis() / 1000))))
          )
        }
        switch (opening._tag) {
          case "LegacyPing":
            if (!rateLimiter.allowAt("status", ip, clock.unsafeCurrentTimeMillis(), snapshot.global)) return closeWith(socket, undefined)
            return answerLegacyPing(connection, opening.ping, peer, snapshot)
          case "LegacyLogin":
            return Effect.zipRight(Effect.logDebug("pre-1.7 login refused"), closeWith(socket, encodeLegacyKick(MESSAGES.outdatedClient)))
        }
        return route({ connection, reader, peer, snapshot, holdings, fields }, opening)
      })
    }

    /** A modern handshake: the rate limit, the server it names, that server's filter, then a ping or a login. */
    const route = (
      at: Pick<Routed, "connection" | "reader" | "peer" | "snapshot" | "holdings"> & { readonly fields: ConnectionLogFields },
      opening: Extract<Opening, { readonly _tag: "Modern" }>
    ): Effect.Effect<void, Error> => {
      const { connection, reader, peer, snapshot, holdings, fields } = at
      const socket = connection.socket
      const ip = peer.clientIp
      const handshake = opening.handshake
      const { host } = splitAddress(handshake.address)
      const isStatus = handshake.nextState === NEXT_STATE_STATUS
      if (!rateLimiter.allowAt(isStatus ? "status" : "login", ip, clock.unsafeCurrentTimeMillis(), snapshot.global)) {
        return Effect.zipRight(
          isStatus ? Effect.logDebug("status ping over [rate_limit]: closed") : Effect.logInfo("login over [rate_limit] refused"),
          refuse(socket, opening, MESSAGES.rateLimited)
        )
      }
      const server = Option.getOrUndefined(router.resolveIn(snapshot, host))
      if (server === undefined) {
        if (snapshot.global.unknown_domain_behavior === "drop") {
          return Effect.zipRight(Effect.logDebug(`unknown domain "${host}": dropped`), closeWith(socket, undefined))
        }
        if (isStatus) return answerStatus(connection, reader, handshake, undefined, peer)
        return Effect.zipRight(Effect.logInfo(`login for unknown domain "${host}" refused`), disconnect(socket, MESSAGES.unknownDomain(host)))
      }
      fields.server = server.id
      if (!ipFilter.allowedFor(server, ip)) {
        return Effect.zipRight(Effect.logInfo(`refused by the [ip_filter] of ${server.id}`), refuse(socket, opening, MESSAGES.notAllowed))
      }
      if (isStatus) return answerStatus(connection, reader, handshake, server, peer)
      return login({ connection, reader, handshake, handshakeRaw: opening.raw, server, peer, snapshot, holdings })
    }

    return { handle }
  })
}) {}
