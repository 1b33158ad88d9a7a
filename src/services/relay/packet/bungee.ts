/**
 * The legacy plugin channel (`[forwarding] legacy_channel`): Portal answers a backend's requests on `BungeeCord` /
 * `bungeecord:main` as a BungeeCord proxy would (protocol/bungeeChannel.ts has the wire format and BungeeCord's
 * behaviour per subchannel), for each subchannel `[forwarding.channel_permissions]` allows. Player lists and counts
 * come from the PlayerRegistry's data plane (every session of this process, any mode); Forward, ForwardToPlayer,
 * Message and KickPlayer reach players of packet sessions in this process (`liveSessions`), since only a packet
 * session can put a packet on a connection. Connect and ConnectOther need server switching: nothing is done, and
 * that is logged once.
 */
import {
  type BungeeAnswer,
  bungeeChannelFor,
  type BungeeRequest,
  decodeBungeeRequest,
  encodeBungeeAnswer,
  encodeBungeeForwarded
} from "../../../protocol/bungeeChannel.js"
import { plainText, type TextComponent } from "../../../protocol/text.js"
import type { ChannelContext, ChannelSession, PacketLog } from "./PacketStart.js"

/** What the channel needs of a packet session. */
export interface BungeePeer {
  readonly name: string
  /** Dashed. */
  readonly uuid: string
  readonly serverId: string
  readonly clientIp: string
  readonly clientPort: number
  readonly protocolVersion: number
  /** A plugin message to the session's backend (once in play). */
  readonly sendToBackend: (channel: string, data: Buffer) => void
  /** A system chat message to the player (once in play). */
  readonly sendChat: (message: TextComponent) => void
  readonly end: (reason: string) => void
}

/** The packet sessions of this process, by server and by lower-cased player name. */
class LiveSessions {
  private readonly byServer = new Map<string, Set<BungeePeer>>()
  private readonly byName = new Map<string, BungeePeer>()

  add(peer: BungeePeer): void {
    let set = this.byServer.get(peer.serverId)
    if (set === undefined) this.byServer.set(peer.serverId, (set = new Set()))
    set.add(peer)
    this.byName.set(peer.name.toLowerCase(), peer)
  }

  remove(peer: BungeePeer): void {
    const set = this.byServer.get(peer.serverId)
    if (set !== undefined) {
      set.delete(peer)
      if (set.size === 0) this.byServer.delete(peer.serverId)
    }
    const key = peer.name.toLowerCase()
    if (this.byName.get(key) === peer) this.byName.delete(key)
  }

  named(name: string): BungeePeer | undefined {
    return this.byName.get(name.toLowerCase())
  }

  /** One session on each server that has any (except `exceptServer`): the way a message reaches a backend. */
  onePerServer(exceptServer: string | undefined): Array<BungeePeer> {
    const out: Array<BungeePeer> = []
    for (const [serverId, set] of this.byServer) {
      if (serverId === exceptServer) continue
      const first = set.values().next()
      if (first.done !== true) out.push(first.value)
    }
    return out
  }

  oneOn(serverId: string): BungeePeer | undefined {
    const first = this.byServer.get(serverId)?.values().next()
    return first === undefined || first.done === true ? undefined : first.value
  }

  all(): Array<BungeePeer> {
    return [...this.byName.values()]
  }
}

export const liveSessions = new LiveSessions()

/** Connect and ConnectOther are logged once per process. */
const loggedOnce = new Set<string>()

const findPlayer = (context: ChannelContext, name: string): ChannelSession | undefined => {
  const wanted = name.toLowerCase()
  return context.sessions().find((entry) => entry.name !== undefined && entry.name.toLowerCase() === wanted)
}

const serverKnown = (context: ChannelContext, id: string) => context.servers.some((server) => server.id === id)

const names = (entries: ReadonlyArray<ChannelSession>): Array<string> => entries.flatMap((entry) => (entry.name === undefined ? [] : [entry.name]))

/** The answer to a request, or undefined when BungeeCord would send none. */
const answerOf = (peer: BungeePeer, request: BungeeRequest, context: ChannelContext): BungeeAnswer | undefined => {
  switch (request._tag) {
    case "IP":
      return { _tag: "IP", ip: peer.clientIp, port: peer.clientPort }
    case "IPOther": {
      const other = findPlayer(context, request.player)
      return other === undefined ? undefined : { _tag: "IPOther", player: other.name ?? request.player, ip: other.clientAddress, port: other.clientPort }
    }
    case "PlayerCount":
      if (request.server === "ALL") return { _tag: "PlayerCount", server: "ALL", count: context.servers.reduce((sum, server) => sum + context.countFor(server.id), 0) }
      return serverKnown(context, request.server) ? { _tag: "PlayerCount", server: request.server, count: context.countFor(request.server) } : undefined
    case "PlayerList":
      if (request.server === "ALL") return { _tag: "PlayerList", server: "ALL", players: names(context.sessions()) }
      return serverKnown(context, request.server) ? { _tag: "PlayerList", server: request.server, players: names(context.sessions(request.server)) } : undefined
    case "GetServers":
      return { _tag: "GetServers", servers: context.servers.map((server) => server.id) }
    case "GetServer":
      return { _tag: "GetServer", server: peer.serverId }
    case "GetPlayerServer": {
      const other = findPlayer(context, request.player)
      return { _tag: "GetPlayerServer", player: request.player, server: other?.serverId ?? "" }
    }
    case "UUID":
      return { _tag: "UUID", uuid: peer.uuid }
    case "UUIDOther": {
      const other = findPlayer(context, request.player)
      return other?.uuid === undefined ? undefined : { _tag: "UUIDOther", player: other.name ?? request.player, uuid: other.uuid }
    }
    case "ServerIP": {
      const server = context.servers.find((entry) => entry.id === request.server)
      return server === undefined ? undefined : { _tag: "ServerIP", server: server.id, ip: server.host, port: server.port }
    }
    default:
      return undefined
  }
}

/** JSON text from a plugin (MessageRaw, KickPlayerRaw); undefined when it is not JSON. */
const parseJsonText = (json: string): TextComponent | undefined => {
  try {
    const value: unknown = JSON.parse(json)
    if (typeof value === "string") return value
    if (value !== null && typeof value === "object" && !Array.isArray(value)) return { text: "", extra: [value] }
    if (Array.isArray(value)) return { text: "", extra: value }
    return undefined
  } catch {
    return undefined
  }
}

/** Delivers what a request asks of other players (Forward, Message, KickPlayer); nothing to answer. */
const act = (peer: BungeePeer, request: BungeeRequest, log: PacketLog): void => {
  switch (request._tag) {
    case "Forward": {
      const forwarded = encodeBungeeForwarded(request.channel, request.data)
      if (forwarded._tag === "Invalid") return log.debug(`BungeeCord Forward dropped: ${forwarded.reason}`)
      const targets =
        request.target === "ALL" || request.target === "ONLINE"
          ? liveSessions.onePerServer(peer.serverId)
          : [liveSessions.oneOn(request.target)].flatMap((target) => (target === undefined ? [] : [target]))
      for (const target of targets) target.sendToBackend(bungeeChannelFor(target.protocolVersion), forwarded.data)
      return
    }
    case "ForwardToPlayer": {
      const forwarded = encodeBungeeForwarded(request.channel, request.data)
      if (forwarded._tag === "Invalid") return log.debug(`BungeeCord ForwardToPlayer dropped: ${forwarded.reason}`)
      const target = liveSessions.named(request.player)
      target?.sendToBackend(bungeeChannelFor(target.protocolVersion), forwarded.data)
      return
    }
    case "Message":
    case "MessageRaw": {
      const message = request._tag === "Message" ? request.message : parseJsonText(request.json)
      if (message === undefined) return log.debug("BungeeCord MessageRaw dropped: not JSON text")
      const targets = request.target === "ALL" ? liveSessions.all() : [liveSessions.named(request.target)].flatMap((one) => (one === undefined ? [] : [one]))
      for (const target of targets) target.sendChat(message)
      return
    }
    case "KickPlayer":
    case "KickPlayerRaw": {
      const reason = request._tag === "KickPlayer" ? request.reason : parseJsonText(request.json)
      if (reason === undefined) return log.debug("BungeeCord KickPlayerRaw dropped: not JSON text")
      liveSessions.named(request.player)?.end(typeof reason === "string" ? reason : plainText(reason))
      return
    }
    case "Connect":
    case "ConnectOther":
      if (!loggedOnce.has(request._tag)) {
        loggedOnce.add(request._tag)
        log.info(`a backend asked for BungeeCord ${request._tag}: server switching is not available yet, so such requests are ignored (logged once)`)
      }
      return
    default:
      return
  }
}

/** Handles one request a backend sent on the BungeeCord channel `channel` through `peer`'s connection. */
export const handleBungeeRequest = (peer: BungeePeer, channel: string, data: Buffer, context: ChannelContext, log: PacketLog): void => {
  const decoded = decodeBungeeRequest(data)
  if (decoded._tag === "Invalid") return log.debug(`BungeeCord request dropped: ${decoded.reason}`)
  const request = decoded.request
  if (request._tag === "Unknown") return log.debug(`BungeeCord subchannel ${JSON.stringify(request.subchannel.slice(0, 64))} is unknown: dropped`)
  if (!context.permissions[request._tag]) return log.debug(`BungeeCord subchannel ${request._tag} is not permitted ([forwarding.channel_permissions]): dropped`)
  const answer = answerOf(peer, request, context)
  if (answer !== undefined) {
    const encoded = encodeBungeeAnswer(answer)
    if (encoded._tag === "Invalid") return log.debug(`BungeeCord ${request._tag} answer dropped: ${encoded.reason}`)
    return peer.sendToBackend(channel, encoded.data)
  }
  act(peer, request, log)
}
