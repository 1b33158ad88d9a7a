/**
 * The main thread's part in the BungeeCord channel's deliveries with worker threads. A worker delivers what it can to
 * its own players and hands the rest here; the main thread, whose registry lists every worker's sessions, passes it
 * to the other workers that relay players it may be for, one after another, each delivering through its own
 * directory of packet sessions, until nothing of it is wanted any more (`stillWanted`): a Forward reaches each server
 * once, a named player at most once, a message to all every worker.
 */
import * as Effect from "effect/Effect"
import { stillWanted } from "../relay/packet/channelNetwork.js"
import type { ChannelDelivery } from "../relay/packet/PacketStart.js"

/** A live session as the routing reads it from the registry. */
export interface RoutedSession {
  readonly id: number
  readonly serverId: string
  readonly name: string | undefined
}

/** What the main thread knows when it routes a delivery. */
export interface RoutingView {
  /** Every live session the registry lists. */
  readonly sessions: ReadonlyArray<RoutedSession>
  /** The worker (0-based) relaying a session, while it runs. */
  readonly workerOf: (sessionId: number) => number | undefined
  /** The workers running, 0-based, in order. */
  readonly workers: ReadonlyArray<number>
}

/** Whether players of `sessions` (one worker's) may be what `delivery` is for. */
const mayReach = (delivery: ChannelDelivery, sessions: ReadonlyArray<RoutedSession>): boolean => {
  switch (delivery._tag) {
    case "Forward": {
      const { server, skip } = delivery
      return sessions.some((session) => (server === undefined || session.serverId === server) && !skip.includes(session.serverId))
    }
    case "Message":
      // To all: every worker, whatever the registry has heard of its sessions yet.
      if (delivery.player === undefined) return true
      return named(sessions, delivery.player)
    case "ForwardToPlayer":
    case "Kick":
      return named(sessions, delivery.player)
  }
}

const named = (sessions: ReadonlyArray<RoutedSession>, player: string): boolean => {
  const wanted = player.toLowerCase()
  return sessions.some((session) => session.name !== undefined && session.name.toLowerCase() === wanted)
}

/**
 * Passes `delivery`, what worker `origin` could not deliver itself, to the other workers in turn, each only while it
 * may relay players the delivery is still for. `deliverTo` has one worker deliver it and gives the servers of the
 * players it reached (none when that worker did not answer in time).
 */
export const routeDelivery = (
  delivery: ChannelDelivery,
  origin: number,
  view: RoutingView,
  deliverTo: (worker: number, delivery: ChannelDelivery) => Effect.Effect<ReadonlyArray<string>>
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const byWorker = new Map<number, Array<RoutedSession>>()
    for (const session of view.sessions) {
      const worker = view.workerOf(session.id)
      if (worker === undefined || worker === origin) continue
      let list = byWorker.get(worker)
      if (list === undefined) byWorker.set(worker, (list = []))
      list.push(session)
    }
    let left: ChannelDelivery | undefined = delivery
    for (const worker of view.workers) {
      if (left === undefined) return
      if (worker === origin || !mayReach(left, byWorker.get(worker) ?? [])) continue
      left = stillWanted(left, yield* deliverTo(worker, left))
    }
  })
