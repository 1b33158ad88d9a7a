/**
 * The join phase: dials the server's backend (Balancer order, connect timeouts and attempts), builds the handshake
 * the backend must see (Forwarding), and hands both sockets to the relay mode the server's `proxy_mode` calls for:
 * a raw mode after the login was replayed to the backend, a packet mode with the login (name, UUID, properties,
 * version, address), the handshake and the forwarding settings, since it logs into the backend itself. From then on
 * the relay owns the connection, the player's lease and the balancer count.
 *
 * After authentication (client_only) the player's connection is encrypted: a refusal here is an encrypted Disconnect.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { Socket } from "node:net"
import type { BackendAddress } from "../../schema/ServerConfig.js"
import { formatHostPort } from "../../schema/HostPort.js"
import type { AttemptFailure, Backend, PlayerWatch } from "../Backend.js"
import { type SocketReader, WATCH_LIMIT_BYTES } from "../net/SocketReader.js"
import { type Forwarding, forwardingModeOf, type ForwardingUnavailable } from "../Forwarding.js"
import { offlineUuid } from "../../protocol/forwarding.js"
import { splitAddress } from "../../protocol/handshake.js"
import { encodeFrame } from "../../protocol/framing.js"
import { encodeLoginDisconnectBody } from "../../protocol/loginPackets.js"
import type { PlayerRegistryDataPlane } from "../PlayerRegistry.js"
import type { RelayDataPlane } from "../Relay.js"
import type { ChannelContext, ChannelNetwork, PacketLog, PacketStart } from "../relay/packet/PacketStart.js"
import { resolveHost } from "../relay/packet/channelNetwork.js"
import type { ByteMeter, RelayMode, RelayOutcome } from "../relay/RelayMode.js"
import type { StatsDataPlane } from "../Stats.js"
import { type ConnectionTrace, traceRefusal, type TracingDataPlane } from "../telemetry/connectionTrace.js"
import { relayTimeouts } from "../relay/watchdog.js"
import { closeWith, disconnect, letGo } from "./closing.js"
import { backendPreamble } from "./connection.js"
import { type ConnectionLogFields, currentConnectionLog } from "../log/connectionFields.js"
import { MESSAGES } from "./messages.js"
import type { Admitted, Joined } from "./phases.js"

export interface JoinServices {
  readonly stats: StatsDataPlane
  readonly backend: Pick<Backend, "dialFor" | "logFailures">
  readonly forwarding: Pick<Forwarding, "backendHandshake" | "modernSecret">
  readonly relay: RelayDataPlane
  /** The BungeeCord channel of the packet modes reads player counts... */
  readonly registry: Pick<PlayerRegistryDataPlane, "countFor">
  /** ...and looks up sessions and reaches players beyond this thread (workers) through this. */
  readonly channel: ChannelNetwork
  /** Logs outside any fiber (the "left" line is written when a relay ends, long after the session's fiber). */
  readonly logDetached: (effect: Effect.Effect<void>) => void
  /** Whether info lines are logged at all: the "joined" and "left" lines are skipped cheaply when not. */
  readonly infoLogged: boolean
  /** Where a traced connection's record goes when its session ends. */
  readonly tracing: TracingDataPlane | undefined
}

export type JoinPhase = (admitted: Admitted) => Effect.Effect<Joined>

const formatBytes = (bytes: number): string =>
  bytes < 1024 ? `${bytes} B` : bytes < 1048576 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1048576).toFixed(1)} MiB`

/**
 * The dial's watch of a packet-mode player (the bytes it sends meanwhile are kept for the backend). The raw modes are
 * not watched: there a client may send on and half-close (its bytes and its end are the backend's), and the kernel
 * holds what it sends until the relay reads it.
 */
const watchPlayer = (reader: SocketReader): PlayerWatch => (left) => reader.watch("the backend's answer", WATCH_LIMIT_BYTES, left)

/** Whether the player left (or was ended from outside) while the join was under way. */
const gone = (client: Socket): boolean => client.destroyed || client.writableEnded

/** The player left before the relay could start (a login sent with its FIN, say): said, so no session goes unlogged. */
const CLOSED: Effect.Effect<Joined> = Effect.as(Effect.logDebug("the player closed the connection before joining"), "closed")

/** A login Disconnect with `message`, encrypted when the authentication turned encryption on. */
const refuseLogin = (admitted: Admitted, message: string): Effect.Effect<void> => {
  const client = admitted.route.opened.connection.socket
  const encryption = admitted.authentication
  if (encryption === undefined) return disconnect(client, message)
  return Effect.suspend(() => closeWith(client, encryption.encrypt.update(encodeFrame(0x00, encodeLoginDisconnectBody(message), -1))))
}

/** The player as a packet mode logs it into the backend: the authenticated profile, else Login Start's name. */
const packetProfile = (admitted: Admitted) => {
  const authenticated = admitted.authentication?.profile
  if (authenticated !== undefined) return authenticated
  const name = admitted.start.value.name
  // offline trusts the name: the backend gets the UUID an offline-mode server would give it.
  return { name, uuid: offlineUuid(name), properties: [] }
}

/** The failed attempts in the connect-duration histogram and on the trace. */
const noteFailures = (stats: StatsDataPlane, trace: ConnectionTrace | undefined, failures: ReadonlyArray<AttemptFailure>): void => {
  for (const failure of failures) {
    stats.connectAttempt(false, failure.end - failure.start)
    if (trace !== undefined) (trace.attempts ??= []).push({ address: failure.address, start: failure.start, end: failure.end, error: failure.reason })
  }
}

/**
 * A line written after the connection's fiber has ended (the relay's end, a packet session's lines) with the
 * connection's fields as its fiber's lines have them: first and in their order (`conn`, `ip`, `server`), as a worker's
 * lines are written too. As annotations they came in the order of a hash map.
 */
const asConnection = <A>(line: Effect.Effect<A>, fields: ConnectionLogFields): Effect.Effect<A> => Effect.locally(line, currentConnectionLog, fields)

export const makeJoin = ({ stats, backend, forwarding, relay, registry, channel: network, logDetached, infoLogged, tracing }: JoinServices): JoinPhase => {
  /** Lines about a packet session, with the connection's fields, written outside any fiber. */
  const packetLog = (fields: ConnectionLogFields): PacketLog => ({
    debug: (message) => logDetached(asConnection(Effect.logDebug(message), fields)),
    info: (message) => logDetached(asConnection(Effect.logInfo(message), fields)),
    warning: (message) => logDetached(asConnection(Effect.logWarning(message), fields))
  })
  /**
   * What runs when a player's relay ends: gives the leases back and logs the "left" line. Made out here, from just
   * what it needs, because a function made inside the join would keep everything the login held (its reader and
   * buffers, the peer, the handshake) for as long as the player stays.
   */
  const relayEnded = (
    who: string,
    serverId: string,
    fields: ConnectionLogFields,
    releases: ReadonlyArray<() => void>,
    meters: { readonly current: ByteMeter | undefined },
    trace: ConnectionTrace | undefined
  ) => {
    const started = Date.now()
    if (trace !== undefined) trace.sessionStart = performance.now()
    return (outcome: RelayOutcome): void => {
      for (const release of releases) release()
      const bytesIn = meters.current?.bytesIn() ?? 0
      const bytesOut = meters.current?.bytesOut() ?? 0
      stats.sessionEnded(bytesIn, bytesOut)
      if (trace !== undefined && tracing !== undefined) {
        trace.sessionEnd = trace.end = performance.now()
        trace.bytesIn = bytesIn
        trace.bytesOut = bytesOut
        trace.closedBy = outcome.end
        trace.closedDetail = outcome.detail
        trace.outcome = "relayed"
        tracing.finish(trace)
      }
      if (!infoLogged) return
      logDetached(
        Effect.logInfo(
          `${who} left ${serverId} after ${Duration.format(Duration.millis(Date.now() - started))} ` +
            `(${outcome.end.replace("_", " ")}${outcome.detail !== undefined ? `: ${outcome.detail}` : ""}; ` +
            `in ${formatBytes(bytesIn)}, out ${formatBytes(bytesOut)})`
        ).pipe((line) => asConnection(line, fields))
      )
    }
  }

  /** What a packet mode needs to log the player into the backend itself. */
  const packetStart = (admitted: Admitted, preface: Buffer, modernSecret: string | undefined, fields: ConnectionLogFields): PacketStart => {
    const { opened, server } = admitted.route
    const { peer, reader, snapshot } = opened
    const profile = packetProfile(admitted)
    const login = admitted.start.value
    const forwardingConfig = snapshot.global.forwarding
    const channel: ChannelContext | undefined = forwardingConfig.legacy_channel
      ? {
          permissions: forwardingConfig.channel_permissions,
          lookup: network.lookup,
          route: network.route,
          firstTime: network.firstTime,
          countFor: (id) => {
            const counted = snapshot.servers.get(id)
            return counted === undefined ? 0 : registry.countFor(counted)
          },
          servers: [...snapshot.servers.values()].map((entry) => ({
            id: entry.id,
            host: entry.config.addresses[0]?.host ?? "",
            port: entry.config.addresses[0]?.port ?? 0
          })),
          resolve: resolveHost
        }
      : undefined
    return {
      serverId: server.id,
      login: {
        name: profile.name,
        uuid: profile.uuid,
        properties: profile.properties,
        protocolVersion: opened.opening.handshake.protocolVersion,
        clientIp: peer.clientIp,
        clientPort: peer.clientPort,
        publicKey: login.publicKey,
        // As Velocity: the key's holder is the UUID of the Login Start that carried the key (1.19.1-1.19.2).
        keyHolder: login.publicKey === undefined ? undefined : login.uuid,
        addressSuffix: splitAddress(opened.opening.handshake.address).suffix
      },
      preface,
      buffered: reader.takeBuffered(),
      encryption: admitted.authentication === undefined ? undefined : { encrypt: admitted.authentication.encrypt, decrypt: admitted.authentication.decrypt },
      modernSecret,
      channel,
      backendClosedMessage: MESSAGES.backendClosed,
      log: packetLog(fields)
    }
  }

  /**
   * Hands both sockets to the relay (a raw mode after the login was replayed to the backend; a packet mode with the
   * login it carries out itself); the connection's fiber ends here.
   */
  const startRelay = (
    admitted: Admitted,
    mode: RelayMode,
    backendSocket: Socket,
    address: BackendAddress,
    countedOnAddress: () => void,
    handshakeBytes: Buffer,
    modernSecret: string | undefined
  ): Effect.Effect<Joined> => {
    const { opened, server } = admitted.route
    const { connection, peer, reader } = opened
    const client = connection.socket
    if (gone(client)) return CLOSED
    const releases = [admitted.lease.release, countedOnAddress]
    const preamble = backendPreamble(server, peer)
    const fields: ConnectionLogFields = { conn: connection.id, ip: peer.clientIp, server: server.id }
    let packet: PacketStart | undefined
    if (mode.kind === "packet") {
      packet = packetStart(admitted, preamble === undefined ? handshakeBytes : Buffer.concat([preamble, handshakeBytes]), modernSecret, fields)
    } else {
      const replay = [handshakeBytes, admitted.start.raw, reader.takeBuffered()]
      // Not waited for: the relay starts at once and reports a failed write as the backend's error.
      backendSocket.write(Buffer.concat(preamble === undefined ? replay : [preamble, ...replay]))
    }
    const via = formatHostPort(address)
    // From here the relay owns both sockets and the leases, and this fiber ends.
    const start = () => {
      const meters: { current: ByteMeter | undefined } = { current: undefined }
      const timeouts = relayTimeouts(server.config.timeouts.read, server.config.timeouts.write)
      const onEnd = relayEnded(admitted.who, server.id, fields, releases, meters, connection.trace)
      const live = relay.start(mode, packet === undefined ? { client, backend: backendSocket, timeouts, onEnd } : { client, backend: backendSocket, timeouts, onEnd, packet })
      meters.current = live.meter
      admitted.lease.attachBackend(via, live.meter)
      admitted.lease.attachEnder(live)
      stats.login()
      return "relayed" as const
    }
    if (!infoLogged) return Effect.sync(start)
    return Effect.map(Effect.logInfo(`${admitted.who} joined ${server.id} via ${via}${mode.name === "passthrough" ? "" : ` (${mode.name})`}`), start)
  }

  return (admitted) => {
    const { opened, server } = admitted.route
    const { snapshot, connection, peer } = opened
    const client = connection.socket
    if (gone(client)) return CLOSED
    const trace = connection.trace
    const { mode } = relay.modeFor(server)
    const watch = mode.kind === "packet" ? watchPlayer(opened.reader) : undefined
    return Effect.flatMap(Effect.either(backend.dialFor(watch, server, snapshot.global)), (dialed): Effect.Effect<Joined> => {
      if (dialed._tag === "Left" && dialed.left._tag === "DialAbandoned") {
        // Its place and least_conn count are given back now, not after the connect timeouts.
        noteFailures(stats, trace, dialed.left.attempts)
        return Effect.as(letGo(client, `${admitted.who} left while ${server.id} was dialled (${dialed.left.why})`), "closed")
      }
      if (dialed._tag === "Left") {
        noteFailures(stats, trace, dialed.left.attempts)
        stats.rejected("backend_unreachable")
        traceRefusal(trace, "backend_unreachable")
        return Effect.as(
          Effect.zipRight(
            Effect.logWarning(`${admitted.who} could not join ${server.id}: ${dialed.left.message}`),
            refuseLogin(admitted, server.config.disconnect_message)
          ),
          "closed"
        )
      }
      const { socket: backendSocket, address, failures } = dialed.right
      noteFailures(stats, trace, failures)
      stats.connectAttempt(true, dialed.right.end - dialed.right.start)
      if (trace !== undefined) {
        const attempts = (trace.attempts ??= [])
        attempts.push({ address: formatHostPort(address), start: dialed.right.start, end: dialed.right.end, error: undefined })
        trace.forwardingStart = performance.now()
        trace.forwarding = forwardingModeOf(server, snapshot.global)
      }
      const packetMode = mode.kind === "packet"
      const handshake = Effect.suspend(() =>
        forwarding.backendHandshake({
          server,
          global: snapshot.global,
          handshake: opened.opening.handshake,
          raw: opened.opening.raw,
          backend: address,
          clientIp: peer.clientIp,
          login: admitted.start.value,
          profile: packetMode ? packetProfile(admitted) : undefined
        })
      )
      // A packet mode answers modern forwarding itself, with the secret.
      const modern = packetMode && forwardingModeOf(server, snapshot.global) === "modern"
      const prepared: Effect.Effect<{ readonly bytes: Buffer; readonly secret: string | undefined }, ForwardingUnavailable> = modern
        ? Effect.zipWith(handshake, forwarding.modernSecret(snapshot.global), (bytes, secret) => ({ bytes, secret }))
        : Effect.map(handshake, (bytes) => ({ bytes, secret: undefined }))
      const replayed = Effect.flatMap(Effect.either(prepared), (ready): Effect.Effect<Joined> => {
        if (trace !== undefined) trace.forwardingEnd = performance.now()
        if (ready._tag === "Left") {
          stats.rejected("unavailable")
          traceRefusal(trace, "unavailable")
          return Effect.as(
            Effect.zipRight(Effect.logError(`${admitted.who} could not join ${server.id}: ${ready.left.message}`), refuseLogin(admitted, MESSAGES.forwardingUnavailable)),
            "closed"
          )
        }
        return startRelay(admitted, mode, backendSocket, address, dialed.right.release, ready.right.bytes, ready.right.secret)
      })
      // The backend socket is the join's until a relay owns it.
      return (failures.length > 0 ? Effect.zipRight(backend.logFailures(server, failures), replayed) : replayed).pipe(
        Effect.onExit((exit) =>
          Exit.isSuccess(exit) && exit.value === "relayed"
            ? Effect.void
            : Effect.sync(() => {
                backendSocket.destroy()
                dialed.right.release()
              })
        )
      )
    })
  }
}
