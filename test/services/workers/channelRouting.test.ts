/**
 * The main thread's routing of BungeeCord deliveries between worker threads: which workers are asked, in which
 * order, and when it stops, from the registry's sessions and each worker's report of what it reached.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type { ChannelDelivery } from "../../../src/services/relay/packet/PacketStart.js"
import { routeDelivery, type RoutedSession, type RoutingView } from "../../../src/services/workers/channelRouting.js"

/** Sessions on workers 0, 1 and 2 (the worker is the last digit of the id, as connection ids are made). */
const sessions: ReadonlyArray<RoutedSession> = [
  { id: 1000, serverId: "lobby", name: "Alice" },
  { id: 2001, serverId: "games", name: "Bob" },
  { id: 3001, serverId: "lobby", name: "Carol" },
  { id: 4002, serverId: "games", name: "Dave" },
  { id: 5002, serverId: "build", name: "Erin" },
  // Listed, but its worker has stopped.
  { id: 6003, serverId: "hidden", name: "Gone" }
]

const view = (overrides: Partial<RoutingView> = {}): RoutingView => ({
  sessions,
  workerOf: (id) => (id % 1000 === 3 ? undefined : id % 1000),
  workers: [0, 1, 2],
  ...overrides
})

/**
 * Routes `delivery` from worker `origin`; each worker "delivers" to the servers `reaches` gives it (a named player's
 * worker reaches that player's server), and the calls are recorded.
 */
const route = async (delivery: ChannelDelivery, origin: number, reaches: (worker: number, delivery: ChannelDelivery) => ReadonlyArray<string>, over?: Partial<RoutingView>) => {
  const calls: Array<{ worker: number; delivery: ChannelDelivery }> = []
  await Effect.runPromise(
    routeDelivery(delivery, origin, view(over), (worker, wanted) => {
      calls.push({ worker, delivery: wanted })
      return Effect.succeed(reaches(worker, wanted))
    })
  )
  return calls
}

/** What a worker of `sessions` delivers, as deliverHere would with every session a packet session in play. */
const deliversAll = (worker: number, delivery: ChannelDelivery): ReadonlyArray<string> => {
  const own = sessions.filter((session) => session.id % 1000 === worker)
  const named = (player: string) => own.filter((session) => session.name?.toLowerCase() === player.toLowerCase()).map((session) => session.serverId)
  switch (delivery._tag) {
    case "Forward":
      return [...new Set(own.map((session) => session.serverId))].filter(
        (server) => (delivery.server === undefined || server === delivery.server) && !delivery.skip.includes(server)
      )
    case "Message":
      return delivery.player === undefined ? own.map((session) => session.serverId) : named(delivery.player)
    default:
      return named(delivery.player)
  }
}

const data = new Uint8Array([0, 1, 2])

describe("routing BungeeCord deliveries between workers", () => {
  it("sends a named player's delivery only to the worker relaying them, never back to the one that asked", async () => {
    expect(await route({ _tag: "ForwardToPlayer", player: "dave", data }, 0, deliversAll)).toEqual([
      { worker: 2, delivery: { _tag: "ForwardToPlayer", player: "dave", data } }
    ])
    expect(await route({ _tag: "Kick", player: "Bob", reason: "bye" }, 0, deliversAll)).toEqual([
      { worker: 1, delivery: { _tag: "Kick", player: "Bob", reason: "bye" } }
    ])
    // Alice is on the asking worker (which did not have her as a packet session): nowhere else to go.
    expect(await route({ _tag: "Message", player: "alice", message: "hi" }, 0, deliversAll)).toEqual([])
    expect(await route({ _tag: "Kick", player: "nobody", reason: "bye" }, 0, deliversAll)).toEqual([])
    // A stopped worker's sessions are not routed to.
    expect(await route({ _tag: "Kick", player: "Gone", reason: "bye" }, 0, deliversAll)).toEqual([])
  })

  it("stops at the first worker that reached a named player or server, and goes on when one did not", async () => {
    // Two Bobs (one on worker 1, one on worker 2): the first that delivers ends it.
    const twice: ReadonlyArray<RoutedSession> = [...sessions, { id: 7002, serverId: "games", name: "Bob" }]
    expect((await route({ _tag: "ForwardToPlayer", player: "Bob", data }, 0, deliversAll, { sessions: twice })).map((call) => call.worker)).toEqual([1])
    // Worker 1's Bob is not a packet session (it reaches nothing): worker 2 is asked next.
    const onlyTwo = (worker: number, delivery: ChannelDelivery) => (worker === 2 ? deliversAll(worker, delivery) : [])
    expect((await route({ _tag: "ForwardToPlayer", player: "Bob", data }, 0, onlyTwo, { sessions: twice })).map((call) => call.worker)).toEqual([1, 2])
    // A Forward to one server: the workers with players there, until one delivered.
    expect((await route({ _tag: "Forward", server: "games", skip: [], data }, 0, deliversAll)).map((call) => call.worker)).toEqual([1])
    expect((await route({ _tag: "Forward", server: "games", skip: [], data }, 0, onlyTwo)).map((call) => call.worker)).toEqual([1, 2])
    expect(await route({ _tag: "Forward", server: "nowhere", skip: [], data }, 0, deliversAll)).toEqual([])
  })

  it("passes a Forward to every server from worker to worker, each skipping the servers reached before it", async () => {
    const calls = await route({ _tag: "Forward", server: undefined, skip: ["lobby"], data }, 0, deliversAll)
    expect(calls).toEqual([
      { worker: 1, delivery: { _tag: "Forward", server: undefined, skip: ["lobby"], data } },
      { worker: 2, delivery: { _tag: "Forward", server: undefined, skip: ["lobby", "games"], data } }
    ])
    // Worker 2 holds only servers reached already: it is not asked.
    const reachedAll = await route({ _tag: "Forward", server: undefined, skip: ["lobby", "build"], data }, 2, deliversAll)
    expect(reachedAll.map((call) => call.worker)).toEqual([1])
    expect(await route({ _tag: "Forward", server: undefined, skip: ["lobby", "games", "build"], data }, 0, deliversAll)).toEqual([])
  })

  it("sends a message to all to every other worker, and a worker that does not answer reaches nothing", async () => {
    const calls = await route({ _tag: "Message", player: undefined, message: "all" }, 1, () => [], { sessions: [] })
    expect(calls.map((call) => call.worker)).toEqual([0, 2])
    // Worker 1 did not answer (no servers reached): worker 2 still gets the Forward for games.
    const silentOne = (worker: number, delivery: ChannelDelivery) => (worker === 1 ? [] : deliversAll(worker, delivery))
    const forward = await route({ _tag: "Forward", server: undefined, skip: ["lobby"], data }, 0, silentOne)
    expect(forward.map((call) => [call.worker, call.delivery._tag === "Forward" ? call.delivery.skip : []])).toEqual([
      [1, ["lobby"]],
      [2, ["lobby"]]
    ])
  })
})
