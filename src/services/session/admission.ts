/**
 * The admission phase: reads Login Start, then the checks a login passes before Portal dials its backend (player
 * bans, what the server's mode cannot serve), takes the player's place in the registry under `max_players`, and wakes a
 * sleeping server (waiting for it). All checks are synchronous; only the wake waits. A packet mode refuses a client
 * version its packet table does not know before Login Start is read.
 */
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { Socket } from "node:net"
import { offlineUuid } from "../../protocol/forwarding.js"
import { decodeLoginStartBody, MAX_LOGIN_START_FRAME_BYTES } from "../../protocol/login.js"
import { MODERN_FORWARDING_MIN_PROTOCOL } from "../../protocol/modernForwarding.js"
import { packetIdsFor, supportedRangeText } from "../../protocol/packetIds.js"
import { banMessage } from "../bans/message.js"
import type { BanDataPlane } from "../BanStore.js"
import { forwardingModeOf } from "../Forwarding.js"
import { framedPacket, type ReadError, WATCH_LIMIT_BYTES } from "../net/SocketReader.js"
import { nameClaimKey, type PlayerRegistryDataPlane, releasingAlso } from "../PlayerRegistry.js"
import { isPacketMode } from "../relay/modes.js"
import type { EnsureResult, ServerManager } from "../ServerManager.js"
import type { RejectReason, StatsDataPlane } from "../Stats.js"
import type { RefusalLines } from "../log/refusalLines.js"
import { type ConnectionTrace, traceRefusal } from "../telemetry/connectionTrace.js"
import { disconnect, letGo, loginEnder, tellLoginReadFailure } from "./closing.js"
import { MESSAGES } from "./messages.js"
import { HANDSHAKE_TIMEOUT_MS } from "./opening.js"
import type { Admitted, LoginRoute } from "./phases.js"

export interface AdmissionServices {
  readonly bans: BanDataPlane
  readonly registry: Pick<PlayerRegistryDataPlane, "admit" | "claimOnline">
  /** The lifecycle: synchronous reads, and the wait for a sleeping server (wake on join). */
  readonly manager: Pick<ServerManager, "dataPlane" | "ensureOnline">
  readonly clock: Clock.Clock
  readonly stats: StatsDataPlane
  readonly refusals: RefusalLines
}

export type AdmissionPhase = (route: LoginRoute) => Effect.Effect<Admitted | undefined, ReadError>

/** Ends a login that is still being set up: the player is in the login state, so a Disconnect is understood. */

/** The admission's verdict on the connection's trace (`admitted`, or the refusal's reason). */
const traceAdmission = (trace: ConnectionTrace | undefined, verdict: string): void => {
  if (trace !== undefined && Number.isNaN(trace.admissionEnd)) {
    trace.admissionEnd = performance.now()
    trace.admission = verdict
  }
}

/** The wake's result on the connection's trace. */
const traceWake = (trace: ConnectionTrace | undefined, result: string): void => {
  if (trace === undefined) return
  trace.wakeEnd = performance.now()
  trace.wake = result
}

export const makeAdmission = ({ bans, registry, manager, clock, stats, refusals }: AdmissionServices): AdmissionPhase => {
  /** `line` at `level`, while few refusals for `reason` come (log/refusalLines.ts). */
  const refused = (
    socket: Socket,
    level: "info" | "warning",
    line: string,
    message: string,
    reason: RejectReason,
    trace: ConnectionTrace | undefined
  ) => {
    stats.rejected(reason)
    traceAdmission(trace, reason)
    traceRefusal(trace, reason)
    return Effect.as(Effect.zipRight(refusals.say(reason, level, line), disconnect(socket, message)), undefined)
  }

  const admit = (route: LoginRoute, start: Admitted["start"]): Effect.Effect<Admitted | undefined> => {
    const { opened, server } = route
    const { connection, peer, snapshot } = opened
    const client = connection.socket
    // The handshake phase is over: this connection no longer counts against the flood bounds.
    opened.slot()
    const player = start.value
    // offline trusts the name and tells the backend the offline-mode UUID of it (session/join.ts): that is the
    // player's identity for bans and the registry too. client_only replaces it after authentication.
    const uuid = server.config.proxy_mode === "offline" ? offlineUuid(player.name) : player.uuid
    const who = `${player.name}${uuid !== undefined ? ` (${uuid})` : ""}`
    const trace = connection.trace
    if (trace !== undefined) trace.player = player.name
    const now = clock.unsafeCurrentTimeMillis()
    const playerBan = bans.playerBan({ name: player.name, uuid }, now)
    if (playerBan !== undefined) {
      return refused(client, "info", `refused ${who}: banned (${playerBan.reason})`, banMessage(playerBan, Math.floor(now / 1000)), "banned", trace)
    }
    if (forwardingModeOf(server, snapshot.global) === "modern") {
      // Modern forwarding answers a login plugin request, which only a packet mode reads and only 1.13+ has.
      if (!isPacketMode(server)) {
        return refused(client, "warning", `refused ${who}: modern forwarding needs a packet proxy mode (offline or client_only)`, MESSAGES.forwardingUnavailable, "unavailable", trace)
      }
      if (opened.opening.handshake.protocolVersion < MODERN_FORWARDING_MIN_PROTOCOL) {
        return refused(client, "info", `refused ${who}: modern forwarding needs Minecraft 1.13 or newer (protocol ${opened.opening.handshake.protocolVersion})`, MESSAGES.modernNeeds113, "unavailable", trace)
      }
    }
    // offline: one session per player name on the proxy, whatever its case, as BungeeCord and Velocity hold it (the
    // offline UUID of `Twin` is not that of `twin`, so the claim is the lower-case name's); client_only claims the
    // authenticated UUID and the name once authenticated.
    const claim = server.config.proxy_mode === "offline" ? registry.claimOnline(nameClaimKey(player.name)) : undefined
    if (claim?._tag === "Taken") {
      return refused(client, "info", `refused ${who}: already connected to this proxy`, MESSAGES.alreadyConnected, "already_connected", trace)
    }
    const placed = registry.admit(
      server,
      {
        id: connection.id,
        serverId: server.id,
        clientAddress: peer.clientIp,
        clientPort: peer.clientPort,
        protocolVersion: opened.opening.handshake.protocolVersion,
        name: player.name,
        uuid
      },
      now
    )
    if (placed === undefined) {
      if (claim?._tag === "Claimed") claim.release()
      return refused(client, "info", `refused ${who}: ${server.id} is full (${server.config.max_players} player${server.config.max_players === 1 ? "" : "s"})`, MESSAGES.serverFull, "server_full", trace)
    }
    const lease = claim?._tag === "Claimed" ? releasingAlso(placed, claim.release) : placed
    lease.attachEnder(loginEnder(client))
    const admitted: Admitted = { route, start, who, lease }
    traceAdmission(trace, "admitted")
    // A `[server_manager]` that a reload has just added is not tracked until its first state is known: the join waits.
    if (!manager.dataPlane.manages(server.id) && server.config.server_manager === undefined) return Effect.succeed(admitted)
    if (trace !== undefined) trace.wakeStart = performance.now()
    // While the server is not up the player is watched: one who gives up (closes) during a wake of up to a minute
    // gives its place back then, not when the wait ends. An online server's join is not watched, so that a raw
    // mode's client may still send on and half-close with its login.
    const waited: Effect.Effect<EnsureResult | { readonly _tag: "Left"; readonly why: string }> =
      manager.dataPlane.stateOf(server.id) === "online"
        ? manager.ensureOnline(server.id)
        : Effect.raceFirst(
            manager.ensureOnline(server.id),
            Effect.map(route.opened.reader.gone("the server's start", WATCH_LIMIT_BYTES), (why) => ({ _tag: "Left" as const, why }))
          )
    return Effect.flatMap(waited, (wake): Effect.Effect<Admitted | undefined> => {
      if (wake._tag === "Left") {
        traceWake(trace, "left")
        lease.release()
        return Effect.as(letGo(client, `${who} left while ${server.id} was woken (${wake.why})`), undefined)
      }
      traceWake(trace, wake._tag === "Online" ? "online" : wake._tag === "Starting" ? "starting" : wake.state)
      if (wake._tag === "Online") return Effect.succeed(admitted)
      lease.release()
      if (wake._tag === "Starting") {
        return refused(client, "info", `${who} asked to rejoin: ${server.id} is still starting`, MESSAGES.starting, "unavailable", trace)
      }
      return refused(
        client,
        "warning",
        `${who} could not join ${server.id}: ${wake.state} (${wake.reason})`,
        server.config.disconnect_message,
        "unavailable",
        trace
      )
    }).pipe(Effect.onInterrupt(() => Effect.sync(lease.release)))
  }

  return (route) => {
    const protocolVersion = route.opened.opening.handshake.protocolVersion
    const trace = route.opened.connection.trace
    if (trace !== undefined) trace.admissionStart = performance.now()
    if (isPacketMode(route.server) && packetIdsFor(protocolVersion) === undefined) {
      route.opened.slot()
      return refused(
        route.opened.connection.socket,
        "info",
        `refused a login to ${route.server.id}: protocol version ${protocolVersion} is not supported by the packet modes`,
        MESSAGES.unsupportedVersion(supportedRangeText()),
        "unavailable",
        trace
      )
    }
    return Effect.flatMap(
      route.opened.reader.read(
        "Login Start",
        MAX_LOGIN_START_FRAME_BYTES,
        HANDSHAKE_TIMEOUT_MS,
        framedPacket(0x00, MAX_LOGIN_START_FRAME_BYTES, (body) => decodeLoginStartBody(body, route.opened.opening.handshake.protocolVersion))
      ).pipe(
        Effect.catchAll((error) => {
          // The handshake place is free while the Disconnect is flushed (a client that does not read holds it 2 s).
          route.opened.slot()
          return tellLoginReadFailure(route.opened.connection.socket, refusals)(error)
        })
      ),
      (start) => admit(route, start)
    )
  }
}
