/**
 * The legacy plugin channel (`[forwarding] legacy_channel`): Portal answers a backend's requests on `BungeeCord` /
 * `bungeecord:main` as a BungeeCord proxy would (protocol/bungeeChannel.ts has the wire format and BungeeCord's
 * behaviour per subchannel), for each subchannel `[forwarding.channel_permissions]` allows, proxy-wide whatever the
 * number of threads:
 * - Counts are shared by every thread. Lookups of sessions (PlayerList, IPOther, UUIDOther, GetPlayerServer) go
 *   through the context's `lookup`: this thread's registry on one thread, a call to the main thread with workers.
 *   Answers go back in the order asked, a later answer waiting for a lookup before it.
 * - Forward, ForwardToPlayer, Message and KickPlayer reach players of packet sessions (only a packet session can put
 *   a packet on a connection), through each thread's directory of them (`liveSessions`): this thread's first, and
 *   with workers what is left goes through the main thread to the workers that relay the other players
 *   (`deliverHere` runs there).
 * - Connect and ConnectOther need server switching: nothing is done, and that is logged once.
 */
import { isIP } from "node:net"
import {
  type BungeeAnswer,
  bungeeChannelFor,
  type BungeeRequest,
  decodeBungeeRequest,
  encodeBungeeAnswer,
  encodeBungeeForwarded
} from "../../../protocol/bungeeChannel.js"
import type { TextComponent } from "../../../protocol/text.js"
import { stillWanted } from "./channelNetwork.js"
import type { ChannelContext, ChannelDelivery, ChannelQuery, ChannelSession, PacketLog } from "./PacketStart.js"

/** What the channel needs of a packet session. */
export interface BungeePeer {
  readonly name: string
  /** Dashed. */
  readonly uuid: string
  readonly serverId: string
  readonly clientIp: string
  readonly clientPort: number
  readonly protocolVersion: number
  /** Whether a plugin message to the backend would be sent now: both sides in play, the session not ending. */
  readonly reachesBackend: boolean
  /** A plugin message to the session's backend (once in play). */
  readonly sendToBackend: (channel: string, data: Buffer) => void
  /** A system chat message to the player (once in play). */
  readonly sendChat: (message: TextComponent) => void
  readonly end: (reason: TextComponent) => void
}

const firstReaching = (peers: Iterable<BungeePeer>): BungeePeer | undefined => {
  for (const peer of peers) if (peer.reachesBackend) return peer
  return undefined
}

/** The packet sessions of this thread, by server and by lower-cased player name. */
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

  /**
   * One session on each server that has one in play (except those in `skip`): the way a message reaches a backend.
   * A session still logging in or being reconfigured cannot carry it, so another on the same server is taken.
   */
  onePerServer(skip: ReadonlySet<string>): Array<BungeePeer> {
    const out: Array<BungeePeer> = []
    for (const [serverId, set] of this.byServer) {
      if (skip.has(serverId)) continue
      const peer = firstReaching(set)
      if (peer !== undefined) out.push(peer)
    }
    return out
  }

  oneOn(serverId: string): BungeePeer | undefined {
    const set = this.byServer.get(serverId)
    return set === undefined ? undefined : firstReaching(set)
  }

  all(): Array<BungeePeer> {
    return [...this.byName.values()]
  }
}

export const liveSessions = new LiveSessions()

/** Lookups of one connection waiting for their answer, at most: a backend asking faster than answers come is cut off. */
export const MAX_WAITING_LOOKUPS = 64

/**
 * Answers in the order of the requests, per connection: a lookup with workers is answered later (by the main
 * thread), and the answers asked for after it wait for it, as they would come from BungeeCord.
 */
class InOrder {
  private readonly queues = new Map<BungeePeer, Array<{ done: boolean; send: (() => void) | undefined }>>()

  /** An answer known now: sent at once unless lookups of this connection wait before it. */
  now(peer: BungeePeer, send: () => void): void {
    const queue = this.queues.get(peer)
    if (queue === undefined) return send()
    queue.push({ done: true, send })
  }

  /**
   * A place for an answer that comes later: call the result with how to send it (undefined: no answer) once known.
   * Undefined when too many lookups of this connection wait already.
   */
  later(peer: BungeePeer): ((send: (() => void) | undefined) => void) | undefined {
    let queue = this.queues.get(peer)
    if (queue === undefined) this.queues.set(peer, (queue = []))
    else if (queue.length >= MAX_WAITING_LOOKUPS) return undefined
    const place: { done: boolean; send: (() => void) | undefined } = { done: false, send: undefined }
    queue.push(place)
    const waiting = queue
    return (send) => {
      if (place.done) return
      place.done = true
      place.send = send
      while (waiting.length > 0 && waiting[0]!.done) waiting.shift()!.send?.()
      if (waiting.length === 0 && this.queues.get(peer) === waiting) this.queues.delete(peer)
    }
  }
}

const answers = new InOrder()

const serverKnown = (context: ChannelContext, id: string) => context.servers.some((server) => server.id === id)

const names = (entries: ReadonlyArray<ChannelSession>): Array<string> => entries.flatMap((entry) => (entry.name === undefined ? [] : [entry.name]))

/** The requests answered from a lookup of live sessions. */
type Lookup = Extract<BungeeRequest, { readonly _tag: "IPOther" | "UUIDOther" | "GetPlayerServer" | "PlayerList" }>

const isLookup = (request: BungeeRequest): request is Lookup =>
  request._tag === "IPOther" || request._tag === "UUIDOther" || request._tag === "GetPlayerServer" || request._tag === "PlayerList"

const queryOf = (request: Lookup): ChannelQuery =>
  request._tag === "PlayerList" ? { _tag: "On", serverId: request.server === "ALL" ? undefined : request.server } : { _tag: "Named", name: request.player }

/** The answer to a lookup from the sessions it found, or undefined when BungeeCord would send none. */
const answerFound = (request: Lookup, found: ReadonlyArray<ChannelSession>): BungeeAnswer | undefined => {
  switch (request._tag) {
    case "PlayerList":
      return { _tag: "PlayerList", server: request.server, players: names(found) }
    case "IPOther": {
      const other = found[0]
      return other === undefined ? undefined : { _tag: "IPOther", player: other.name ?? request.player, ip: other.clientAddress, port: other.clientPort }
    }
    case "GetPlayerServer":
      return { _tag: "GetPlayerServer", player: request.player, server: found[0]?.serverId ?? "" }
    case "UUIDOther": {
      const other = found[0]
      return other?.uuid === undefined ? undefined : { _tag: "UUIDOther", player: other.name ?? request.player, uuid: other.uuid }
    }
  }
}

/** The answer to a request that needs no lookup, or undefined when BungeeCord would send none. */
const answerOf = (peer: BungeePeer, request: BungeeRequest, context: ChannelContext): BungeeAnswer | undefined => {
  switch (request._tag) {
    case "IP":
      return { _tag: "IP", ip: peer.clientIp, port: peer.clientPort }
    case "PlayerCount":
      if (request.server === "ALL") return { _tag: "PlayerCount", server: "ALL", count: context.servers.reduce((sum, server) => sum + context.countFor(server.id), 0) }
      return serverKnown(context, request.server) ? { _tag: "PlayerCount", server: request.server, count: context.countFor(request.server) } : undefined
    case "GetServers":
      return { _tag: "GetServers", servers: context.servers.map((server) => server.id) }
    case "GetServer":
      return { _tag: "GetServer", server: peer.serverId }
    case "UUID":
      return { _tag: "UUID", uuid: peer.uuid }
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

const asBuffer = (data: Uint8Array): Buffer => (Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength))

const present = (peer: BungeePeer | undefined): Array<BungeePeer> => (peer === undefined ? [] : [peer])

/**
 * Delivers to the players of this thread's packet sessions what `delivery` asks; the servers of the players it
 * reached (a Forward's servers, a named player's server). What another thread could not deliver comes here too.
 */
export const deliverHere = (delivery: ChannelDelivery): ReadonlyArray<string> => {
  switch (delivery._tag) {
    case "Forward": {
      const targets =
        delivery.server === undefined
          ? liveSessions.onePerServer(new Set(delivery.skip))
          : delivery.skip.includes(delivery.server)
            ? []
            : present(liveSessions.oneOn(delivery.server))
      const data = asBuffer(delivery.data)
      for (const target of targets) target.sendToBackend(bungeeChannelFor(target.protocolVersion), data)
      return targets.map((target) => target.serverId)
    }
    case "ForwardToPlayer": {
      const target = liveSessions.named(delivery.player)
      if (target === undefined || !target.reachesBackend) return []
      target.sendToBackend(bungeeChannelFor(target.protocolVersion), asBuffer(delivery.data))
      return [target.serverId]
    }
    case "Message": {
      const targets = delivery.player === undefined ? liveSessions.all() : present(liveSessions.named(delivery.player))
      for (const target of targets) target.sendChat(delivery.message)
      return targets.map((target) => target.serverId)
    }
    case "Kick": {
      const target = liveSessions.named(delivery.player)
      if (target === undefined) return []
      target.end(delivery.reason)
      return [target.serverId]
    }
  }
}

/** Delivers here, and (with workers) hands what is still wanted to the main thread for the other threads. */
const deliver = (context: ChannelContext, delivery: ChannelDelivery): void => {
  const reached = deliverHere(delivery)
  if (context.route === undefined) return
  const rest = stillWanted(delivery, reached)
  if (rest !== undefined) context.route(rest)
}

/** Carries out what a request asks of other players (Forward, Message, KickPlayer); nothing to answer. */
const act = (peer: BungeePeer, request: BungeeRequest, context: ChannelContext, log: PacketLog): void => {
  switch (request._tag) {
    case "Forward": {
      const forwarded = encodeBungeeForwarded(request.channel, request.data)
      if (forwarded._tag === "Invalid") return log.debug(`BungeeCord Forward dropped: ${forwarded.reason}`)
      const everywhere = request.target === "ALL" || request.target === "ONLINE"
      return deliver(context, {
        _tag: "Forward",
        server: everywhere ? undefined : request.target,
        // ALL and ONLINE: every other server.
        skip: everywhere ? [peer.serverId] : [],
        data: forwarded.data
      })
    }
    case "ForwardToPlayer": {
      const forwarded = encodeBungeeForwarded(request.channel, request.data)
      if (forwarded._tag === "Invalid") return log.debug(`BungeeCord ForwardToPlayer dropped: ${forwarded.reason}`)
      return deliver(context, { _tag: "ForwardToPlayer", player: request.player, data: forwarded.data })
    }
    case "Message":
    case "MessageRaw": {
      const message = request._tag === "Message" ? request.message : parseJsonText(request.json)
      if (message === undefined) return log.debug("BungeeCord MessageRaw dropped: not JSON text")
      return deliver(context, { _tag: "Message", player: request.target === "ALL" ? undefined : request.target, message })
    }
    case "KickPlayer":
    case "KickPlayerRaw": {
      const reason = request._tag === "KickPlayer" ? request.reason : parseJsonText(request.json)
      if (reason === undefined) return log.debug("BungeeCord KickPlayerRaw dropped: not JSON text")
      return deliver(context, { _tag: "Kick", player: request.player, reason })
    }
    case "Connect":
    case "ConnectOther":
      if (context.firstTime(request._tag)) {
        log.info(`a backend asked for BungeeCord ${request._tag}: server switching is not available yet, so such requests are ignored (logged once)`)
      }
      return
    default:
      return
  }
}

/** The encoded answer, or undefined (with a debug line) when it cannot be written. */
const encoded = (request: BungeeRequest, answer: BungeeAnswer, log: PacketLog): Buffer | undefined => {
  const result = encodeBungeeAnswer(answer)
  if (result._tag === "Invalid") {
    log.debug(`BungeeCord ${request._tag} answer dropped: ${result.reason}`)
    return undefined
  }
  return result.data
}

/** ServerIP: the server's first address, its host name resolved (BungeeCord answers the address it resolved). */
const answerServerIp = (peer: BungeePeer, channel: string, serverId: string, context: ChannelContext, log: PacketLog): void => {
  const server = context.servers.find((entry) => entry.id === serverId)
  if (server === undefined) return
  const answerWith = (ip: string) => encoded({ _tag: "ServerIP", server: serverId }, { _tag: "ServerIP", server: server.id, ip, port: server.port }, log)
  if (isIP(server.host) !== 0) {
    const bytes = answerWith(server.host)
    if (bytes !== undefined) answers.now(peer, () => peer.sendToBackend(channel, bytes))
    return
  }
  const settle = answers.later(peer)
  if (settle === undefined) return log.debug(`BungeeCord ServerIP dropped: ${MAX_WAITING_LOOKUPS} lookups of this connection are waiting for their answers`)
  context.resolve(server.host, (address, failure) => {
    if (address === undefined) log.debug(`BungeeCord ServerIP not answered: ${server.host} does not resolve (${failure ?? "no address"})`)
    const bytes = address === undefined ? undefined : answerWith(address)
    settle(bytes === undefined ? undefined : () => peer.sendToBackend(channel, bytes))
  })
}

/** Handles one request a backend sent on the BungeeCord channel `channel` through `peer`'s connection. */
export const handleBungeeRequest = (peer: BungeePeer, channel: string, data: Buffer, context: ChannelContext, log: PacketLog): void => {
  const decoded = decodeBungeeRequest(data)
  if (decoded._tag === "Invalid") return log.debug(`BungeeCord request dropped: ${decoded.reason}`)
  const request = decoded.request
  if (request._tag === "Unknown") return log.debug(`BungeeCord subchannel ${JSON.stringify(request.subchannel.slice(0, 64))} is unknown: dropped`)
  if (!context.permissions[request._tag]) return log.debug(`BungeeCord subchannel ${request._tag} is not permitted ([forwarding.channel_permissions]): dropped`)
  if (isLookup(request)) {
    // A server nobody configured: BungeeCord answers nothing.
    if (request._tag === "PlayerList" && request.server !== "ALL" && !serverKnown(context, request.server)) return
    const settle = answers.later(peer)
    if (settle === undefined) return log.debug(`BungeeCord ${request._tag} dropped: ${MAX_WAITING_LOOKUPS} lookups of this connection are waiting for their answers`)
    return context.lookup(queryOf(request), (found, failure) => {
      if (failure !== undefined) log.debug(`BungeeCord ${request._tag} answered as if nobody were online: ${failure}`)
      const answer = answerFound(request, found)
      const bytes = answer === undefined ? undefined : encoded(request, answer, log)
      settle(bytes === undefined ? undefined : () => peer.sendToBackend(channel, bytes))
    })
  }
  if (request._tag === "ServerIP") return answerServerIp(peer, channel, request.server, context, log)
  const answer = answerOf(peer, request, context)
  if (answer === undefined) return act(peer, request, context, log)
  const bytes = encoded(request, answer, log)
  if (bytes !== undefined) answers.now(peer, () => peer.sendToBackend(channel, bytes))
}
