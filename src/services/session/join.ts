/**
 * The join phase: dials the server's backend (Balancer order, connect timeouts and attempts), builds the handshake
 * the backend must see (Forwarding), replays the login to it, and hands both sockets to the relay mode the server's
 * `proxy_mode` calls for. From then on the relay owns the connection, the player's lease and the balancer count.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { Socket } from "node:net"
import type { BackendAddress } from "../../schema/ServerConfig.js"
import { formatHostPort } from "../../schema/HostPort.js"
import type { Backend } from "../Backend.js"
import type { BalancerDataPlane } from "../Balancer.js"
import type { Forwarding } from "../Forwarding.js"
import type { RelayDataPlane } from "../Relay.js"
import type { ByteMeter, RelayOutcome } from "../relay/RelayMode.js"
import type { StatsDataPlane } from "../Stats.js"
import { relayTimeouts } from "../relay/watchdog.js"
import { disconnect } from "./closing.js"
import { backendPreamble } from "./connection.js"
import { MESSAGES } from "./messages.js"
import type { Admitted, Joined } from "./phases.js"

export interface JoinServices {
  readonly stats: StatsDataPlane
  readonly backend: Pick<Backend, "dial" | "logFailures">
  readonly forwarding: Pick<Forwarding, "backendHandshake">
  readonly balancer: BalancerDataPlane
  readonly relay: RelayDataPlane
  /** Logs outside any fiber (the "left" line is written when a relay ends, long after the session's fiber). */
  readonly logDetached: (effect: Effect.Effect<void>) => void
  /** Whether info lines are logged at all: the "joined" and "left" lines are skipped cheaply when not. */
  readonly infoLogged: boolean
}

export type JoinPhase = (admitted: Admitted) => Effect.Effect<Joined>

const formatBytes = (bytes: number): string =>
  bytes < 1024 ? `${bytes} B` : bytes < 1048576 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1048576).toFixed(1)} MiB`

/** Whether the player left (or was ended from outside) while the join was under way. */
const gone = (client: Socket): boolean => client.destroyed || client.writableEnded

const CLOSED: Effect.Effect<Joined> = Effect.succeed("closed")

export const makeJoin = ({ stats, backend, forwarding, balancer, relay, logDetached, infoLogged }: JoinServices): JoinPhase => {
  /**
   * What runs when a player's relay ends: gives the leases back and logs the "left" line. Made out here, from just
   * what it needs, because a function made inside the join would keep everything the login held (its reader and
   * buffers, the peer, the handshake) for as long as the player stays.
   */
  const relayEnded = (
    who: string,
    serverId: string,
    annotations: Record<string, unknown>,
    releases: ReadonlyArray<() => void>,
    meters: { readonly current: ByteMeter | undefined }
  ) => {
    const started = Date.now()
    return (outcome: RelayOutcome): void => {
      for (const release of releases) release()
      const bytesIn = meters.current?.bytesIn() ?? 0
      const bytesOut = meters.current?.bytesOut() ?? 0
      stats.sessionEnded(bytesIn, bytesOut)
      if (!infoLogged) return
      logDetached(
        Effect.logInfo(
          `${who} left ${serverId} after ${Duration.format(Duration.millis(Date.now() - started))} ` +
            `(${outcome.end.replace("_", " ")}${outcome.detail !== undefined ? `: ${outcome.detail}` : ""}; ` +
            `in ${formatBytes(bytesIn)}, out ${formatBytes(bytesOut)})`
        ).pipe(Effect.annotateLogs(annotations))
      )
    }
  }

  /** Replays the login to the backend and hands both sockets to the relay; the connection's fiber ends here. */
  const startRelay = (admitted: Admitted, backendSocket: Socket, address: BackendAddress, handshakeBytes: Buffer): Effect.Effect<Joined> => {
    const { opened, server } = admitted.route
    const { connection, peer, reader } = opened
    const client = connection.socket
    if (gone(client)) return CLOSED
    const releases = [admitted.lease.release, balancer.acquire(server, address)]
    const preamble = backendPreamble(server, peer)
    const replay = [handshakeBytes, admitted.start.raw, reader.takeBuffered()]
    // Not waited for: the relay starts at once and reports a failed write as the backend's error.
    backendSocket.write(Buffer.concat(preamble === undefined ? replay : [preamble, ...replay]))
    const { mode } = relay.modeFor(server)
    const via = formatHostPort(address)
    // From here the relay owns both sockets and the leases, and this fiber ends.
    const start = () => {
      const meters: { current: ByteMeter | undefined } = { current: undefined }
      const live = relay.start(mode, {
        client,
        backend: backendSocket,
        timeouts: relayTimeouts(server.config.timeouts.read, server.config.timeouts.write),
        onEnd: relayEnded(admitted.who, server.id, { conn: connection.id, ip: peer.clientIp, server: server.id }, releases, meters)
      })
      meters.current = live.meter
      admitted.lease.attachBackend(via, live.meter)
      admitted.lease.attachEnder(live)
      stats.login()
      return "relayed" as const
    }
    if (!infoLogged) return Effect.sync(start)
    return Effect.map(Effect.logInfo(`${admitted.who} joined ${server.id} via ${via}${mode.name === "zero_copy" ? " (zero_copy)" : ""}`), start)
  }

  return (admitted) => {
    const { opened, server } = admitted.route
    const { snapshot, connection, peer } = opened
    const client = connection.socket
    if (gone(client)) return CLOSED
    return Effect.flatMap(Effect.either(backend.dial(server, snapshot.global)), (dialed): Effect.Effect<Joined> => {
      if (dialed._tag === "Left") {
        stats.rejected("backend_unreachable")
        return Effect.as(
          Effect.zipRight(
            Effect.logWarning(`${admitted.who} could not join ${server.id}: ${dialed.left.message}`),
            disconnect(client, server.config.disconnect_message)
          ),
          "closed"
        )
      }
      const { socket: backendSocket, address, failures } = dialed.right
      const handshake = Effect.suspend(() =>
        Effect.either(
          forwarding.backendHandshake({
            server,
            global: snapshot.global,
            handshake: opened.opening.handshake,
            raw: opened.opening.raw,
            backend: address,
            clientIp: peer.clientIp,
            login: admitted.start.value
          })
        )
      )
      const replayed = Effect.flatMap(handshake, (bytes): Effect.Effect<Joined> => {
        if (bytes._tag === "Left") {
          stats.rejected("unavailable")
          return Effect.as(
            Effect.zipRight(
              Effect.logError(`${admitted.who} could not join ${server.id}: ${bytes.left.message}`),
              disconnect(client, MESSAGES.forwardingUnavailable)
            ),
            "closed"
          )
        }
        return startRelay(admitted, backendSocket, address, bytes.right)
      })
      // The backend socket is the join's until a relay owns it.
      return (failures.length > 0 ? Effect.zipRight(backend.logFailures(server, failures), replayed) : replayed).pipe(
        Effect.onExit((exit) => (Exit.isSuccess(exit) && exit.value === "relayed" ? Effect.void : Effect.sync(() => backendSocket.destroy())))
      )
    })
  }
}
