/**
 * The status phase: answers a server-list ping (modern: status request, answer, pong; legacy: one kick packet with
 * the answer) from StatusService, in the state the server is in.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ServerState } from "../../schema/common.js"
import type { ServerDefinition } from "../../schema/decode.js"
import { type Handshake, NEXT_STATE_STATUS } from "../../protocol/handshake.js"
import { encodeLegacyPingResponse } from "../../protocol/legacy.js"
import { encodePongFromBody, encodeStatusResponse } from "../../protocol/status.js"
import type { BalancerDataPlane } from "../Balancer.js"
import { framedPacket, type ReadError, type WriteFailed, writeAll } from "../net/SocketReader.js"
import type { ServerManagerDataPlane } from "../ServerManager.js"
import type { StatsDataPlane } from "../Stats.js"
import type { StatusAnswer, StatusService } from "../StatusService.js"
import type { ConnectionTrace } from "../telemetry/connectionTrace.js"
import { toLegacyStatus } from "../status/motd.js"
import { closeWith } from "./closing.js"
import { backendPreamble } from "./connection.js"
import { HANDSHAKE_TIMEOUT_MS } from "./opening.js"
import type { LegacyRoute, StatusRoute } from "./phases.js"

/** Protocol asked of a backend on behalf of a pre-1.7 client (any modern one gives the same answer). */
export const LEGACY_STATUS_PROTOCOL = 47

export interface StatusServices {
  readonly status: Pick<StatusService, "answer">
  readonly balancer: BalancerDataPlane
  readonly manager: ServerManagerDataPlane
  readonly stats: StatsDataPlane
}

export interface StatusPhase {
  readonly answer: (route: StatusRoute) => Effect.Effect<void, ReadError | WriteFailed>
  readonly answerLegacy: (route: LegacyRoute) => Effect.Effect<void>
}

const statusRequest = framedPacket(0x00, 16, () => undefined)
const pingRequest = framedPacket(0x01, 16, (body) => body)

/** The answer on the connection's trace: where it came from, the state it shows; the connection was answered. */
const traceAnswer = (trace: ConnectionTrace | undefined, answer: StatusAnswer): void => {
  if (trace === undefined) return
  trace.statusEnd = performance.now()
  trace.statusSource = answer.source
  trace.statusState = answer.state
  trace.outcome = "status"
}

export const makeStatusPhase = ({ status, balancer, manager, stats }: StatusServices): StatusPhase => {
  /**
   * The state a ping shows: the server manager's, and for a server that should be online but whose every address
   * fails its health check, `unreachable`.
   */
  const stateOf = (server: ServerDefinition): ServerState => {
    const state = manager.stateOf(server.id)
    return state === "online" && !balancer.anyHealthy(server) ? "unreachable" : state
  }

  return {
    // Plain combinators, as on the login path (see Session.ts).
    answer: ({ opened, server }) => {
      const { connection, reader, peer, opening } = opened
      const trace = connection.trace
      if (trace !== undefined) trace.statusStart = performance.now()
      return reader.read("the status request", 64, HANDSHAKE_TIMEOUT_MS, statusRequest).pipe(
        Effect.zipRight(
          Effect.suspend(() =>
            status.answer({
              server,
              state: server === undefined ? "online" : stateOf(server),
              handshake: opening.handshake,
              clientIp: peer.clientIp,
              preamble: server === undefined ? undefined : backendPreamble(server, peer)
            })
          )
        ),
        Effect.tap((answer) => writeAll(connection.socket, encodeStatusResponse(answer.text))),
        Effect.tap((answer) =>
          Effect.sync(() => {
            stats.ping()
            traceAnswer(trace, answer)
          })
        ),
        Effect.flatMap((answer) => Effect.logDebug(`status ping answered (${answer.source}, ${answer.state})`)),
        Effect.zipRight(reader.read("the ping", 64, HANDSHAKE_TIMEOUT_MS, pingRequest).pipe(Effect.option)),
        Effect.flatMap((ping) => closeWith(connection.socket, Option.isSome(ping) ? encodePongFromBody(ping.value.value) : undefined))
      )
    },

    answerLegacy: ({ opened: { connection, peer, opening }, host, server }) =>
      Effect.suspend(() => {
        const ping = opening.ping
        const trace = connection.trace
        if (trace !== undefined) trace.statusStart = performance.now()
        const handshake: Handshake = {
          protocolVersion: LEGACY_STATUS_PROTOCOL,
          address: ping._tag === "V1_6" ? ping.host : "",
          port: ping._tag === "V1_6" ? ping.port : 25565,
          nextState: NEXT_STATE_STATUS
        }
        return status
          .answer({
            server,
            state: server === undefined ? "online" : stateOf(server),
            handshake,
            clientIp: peer.clientIp,
            preamble: server === undefined ? undefined : backendPreamble(server, peer)
          })
          .pipe(
            Effect.tap((answer) => Effect.logDebug(`legacy ${ping._tag} ping for "${host}" answered (${answer.source})`)),
            Effect.tap((answer) =>
              Effect.sync(() => {
                stats.ping()
                traceAnswer(trace, answer)
              })
            ),
            Effect.flatMap((answer) => closeWith(connection.socket, encodeLegacyPingResponse(ping, toLegacyStatus(answer.json))))
          )
      })
  }
}
