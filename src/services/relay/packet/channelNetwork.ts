/**
 * The BungeeCord channel's lookups over a registry's sessions: on one thread straight from its own registry, with
 * worker threads on the main thread (whose registry lists every worker's sessions) when a worker asks; and what of
 * a delivery is left for other threads once one has delivered it to its own players.
 */
import { lookup } from "node:dns"
import type { ChannelDelivery, ChannelNetwork, ChannelQuery, ChannelSession, OnceRequest } from "./PacketStart.js"

/** The sessions `query` selects, as the channel reads them (plain data: they may cross to another thread). */
export const lookupSessions = (
  sessions: (serverId?: string) => ReadonlyArray<ChannelSession>,
  query: ChannelQuery
): ReadonlyArray<ChannelSession> => {
  const plain = ({ serverId, clientAddress, clientPort, name, uuid }: ChannelSession): ChannelSession => ({ serverId, clientAddress, clientPort, name, uuid })
  if (query._tag === "On") return sessions(query.serverId).map(plain)
  const wanted = query.name.toLowerCase()
  const found = sessions().find((entry) => entry.name !== undefined && entry.name.toLowerCase() === wanted)
  return found === undefined ? [] : [plain(found)]
}

/** One thread: every session is in this thread's registry and every player is relayed here. */
export const localNetwork = (sessions: (serverId?: string) => ReadonlyArray<ChannelSession>): ChannelNetwork => {
  const seen = new Set<OnceRequest>()
  return {
    lookup: (query, reply) => reply(lookupSessions(sessions, query)),
    route: undefined,
    firstTime: (request) => !seen.has(request) && seen.add(request) !== undefined
  }
}

/**
 * What of `delivery` is still wanted once a thread delivered it to players on `reached` (their servers): nothing
 * when its one target was reached (a named player, a named server), else the same delivery, a Forward to every
 * server now skipping those reached. The thread that asked and then the main thread, going from worker to worker,
 * apply it in turn, so a Forward reaches each server once and a named player at most once.
 */
export const stillWanted = (delivery: ChannelDelivery, reached: ReadonlyArray<string>): ChannelDelivery | undefined => {
  switch (delivery._tag) {
    case "Forward":
      if (delivery.server !== undefined) return reached.length > 0 ? undefined : delivery
      return reached.length === 0 ? delivery : { ...delivery, skip: [...new Set([...delivery.skip, ...reached])] }
    case "Message":
      if (delivery.player === undefined) return delivery
      return reached.length > 0 ? undefined : delivery
    case "ForwardToPlayer":
    case "Kick":
      return reached.length > 0 ? undefined : delivery
  }
}

/** A host name's first address from the system resolver (what the backends are dialled through too). */
export const resolveHost = (host: string, reply: (address: string | undefined, failure?: string) => void): void =>
  lookup(host, (error, address) => (error === null ? reply(address) : reply(undefined, error.code ?? error.message)))
