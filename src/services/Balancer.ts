/**
 * Balancer: which backend address a login tries first. Keeps per-address state (live sessions, round robin
 * weights, passive ejection after failed connects, active health, slow start after recovery), in the state shared
 * by every thread (services/shared/balancerState.ts) so that least_conn counts, ejections and slow start are
 * proxy-wide.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ServerDefinition } from "../schema/decode.js"
import { formatHostPort } from "../schema/HostPort.js"
import type { BackendAddress } from "../schema/ServerConfig.js"
import { type AddressState, ejectionMillis, freshState, orderCandidates } from "./balancer/strategy.js"
import { monotonicMillis } from "./monotonicClock.js"
import { releaseOnce } from "./once.js"
import type { SharedBalancer } from "./shared/balancerState.js"
import { SharedMemory } from "./SharedMemory.js"

export interface AddressStatus {
  readonly address: string
  readonly weight: number
  readonly active: number
  readonly healthy: boolean
  /** On Effect's monotonic clock (see monotonicClock.ts), not a wall-clock date. */
  readonly ejectedUntil: number | undefined
  readonly failures: number
}

/** The connection path's surface: synchronous, called for every login; `now` is on the monotonic clock. */
export interface BalancerDataPlane {
  /** The addresses in the order a login tries them. */
  readonly order: (server: ServerDefinition, now: number) => ReadonlyArray<BackendAddress>
  /** A connect succeeded: the address is trusted again (and ramps up if it had been failing). */
  readonly succeeded: (server: ServerDefinition, address: BackendAddress, now: number) => void
  /** A connect failed: eject the address for a growing back-off. */
  readonly failed: (server: ServerDefinition, address: BackendAddress, now: number) => void
  /** Counts a live session on an address for least_conn until the returned release is called (idempotent). */
  readonly acquire: (server: ServerDefinition, address: BackendAddress) => () => void
  /** Whether any address passes the active health check (true for servers without one). */
  readonly anyHealthy: (server: ServerDefinition) => boolean
}

/**
 * The per-address state and its arithmetic. A server with slots (ServerDefinition.slots) has its state in the
 * state shared by every thread, read and changed under the server's lock; a server without (tests with a fixed
 * configuration, a server past the shared capacity) has state of this thread's own.
 */
export const makeBalancerDataPlane = (shared: SharedBalancer | undefined) => {
  // Thread-local state of servers without slots, by server id and address.
  const local = new Map<string, Map<string, AddressState>>()

  const localState = (serverId: string, address: BackendAddress): AddressState => {
    const key = formatHostPort(address)
    let perServer = local.get(serverId)
    if (perServer === undefined) local.set(serverId, (perServer = new Map()))
    let state = perServer.get(key)
    if (state === undefined) perServer.set(key, (state = freshState()))
    return state
  }

  /** Forgets local state of addresses a server no longer lists (after a reload), keeping live counts of the rest. */
  const prune = (server: ServerDefinition) => {
    const perServer = local.get(server.id)
    if (perServer === undefined) return
    const listed = new Set(server.config.addresses.map(formatHostPort))
    for (const key of perServer.keys()) if (!listed.has(key)) perServer.delete(key)
  }

  /** The shared slot of an address of `server`, or -1. */
  const slotOf = (server: ServerDefinition, address: BackendAddress): number => {
    const slots = server.slots
    if (slots === undefined || shared === undefined) return -1
    const index = server.config.addresses.indexOf(address)
    return index < 0 ? -1 : (slots.addresses[index] ?? -1)
  }

  const stateOf = (server: ServerDefinition, address: BackendAddress): AddressState => {
    const slot = slotOf(server, address)
    return slot >= 0 ? shared!.state(slot) : localState(server.id, address)
  }

  /** Runs `f` under the server's shared lock where it has one. */
  const locked = <A>(server: ServerDefinition, f: () => A): A => {
    const slot = shared === undefined ? undefined : server.slots?.server
    if (slot === undefined) return f()
    const held = shared!.lockServer(slot)
    try {
      return f()
    } finally {
      if (held) shared!.unlockServer(slot)
    }
  }

  const markRecovered = (state: AddressState, now: number) => {
    state.recoveredAt = now
    state.currentWeight = 0
  }

  const order = (server: ServerDefinition, now: number): ReadonlyArray<BackendAddress> => {
    if (server.slots === undefined || shared === undefined) prune(server)
    const candidates = server.config.addresses.map((address) => ({ address, state: stateOf(server, address) }))
    const slowStart =
      server.config.slow_start === undefined
        ? undefined
        : { windowMs: Duration.toMillis(server.config.slow_start), aggression: server.config.slow_start_aggression }
    const picks = shared !== undefined && server.slots !== undefined ? shared.pickCounter(server.slots.server) : undefined
    return locked(server, () => orderCandidates(server.config.balance, candidates, now, slowStart, picks)).map((candidate) => candidate.address)
  }

  const dataPlane: BalancerDataPlane = {
    order,
    succeeded: (server, address, now) =>
      locked(server, () => {
        const state = stateOf(server, address)
        if (state.failures > 0) markRecovered(state, now)
        state.failures = 0
        state.ejectedUntil = 0
      }),
    failed: (server, address, now) =>
      locked(server, () => {
        const state = stateOf(server, address)
        state.failures += 1
        state.ejectedUntil = now + ejectionMillis(state.failures)
      }),
    acquire: (server, address) => {
      const slot = slotOf(server, address)
      if (slot >= 0) return shared!.acquire(slot)
      localState(server.id, address).active += 1
      return releaseOnce(() => {
        const state = local.get(server.id)?.get(formatHostPort(address))
        if (state !== undefined && state.active > 0) state.active -= 1
      })
    },
    anyHealthy: (server) => server.config.addresses.some((address) => stateOf(server, address).healthy)
  }

  /** The active health check's verdict for an address (the main thread's health monitor). */
  const setHealth = (server: ServerDefinition, address: BackendAddress, healthy: boolean, now: number) =>
    locked(server, () => {
      const state = stateOf(server, address)
      if (healthy && !state.healthy) markRecovered(state, now)
      state.healthy = healthy
      if (healthy) {
        state.failures = 0
        state.ejectedUntil = 0
      }
    })

  const status = (server: ServerDefinition, now: number): ReadonlyArray<AddressStatus> =>
    server.config.addresses.map((address) => {
      const state = stateOf(server, address)
      return {
        address: formatHostPort(address),
        weight: address.weight,
        active: state.active,
        healthy: state.healthy,
        ejectedUntil: state.ejectedUntil > now ? state.ejectedUntil : undefined,
        failures: state.failures
      }
    })

  return { dataPlane, setHealth, status }
}

export class Balancer extends Effect.Service<Balancer>()("portal/Balancer", {
  effect: Effect.map(Effect.serviceOption(SharedMemory), (memory) => {
    const { dataPlane, setHealth, status } = makeBalancerDataPlane(Option.getOrUndefined(memory)?.balancer)
    return {
      dataPlane,
      /** The active health check's verdict for an address. */
      setHealth: (server: ServerDefinition, address: BackendAddress, healthy: boolean) =>
        Effect.map(monotonicMillis, (now) => setHealth(server, address, healthy, now)),
      /** Whether any address passes the active health check (true for servers without one). */
      anyHealthy: (server: ServerDefinition) => Effect.sync(() => dataPlane.anyHealthy(server)),
      /** Every address of a server with its weight, live sessions (all threads), health and ejection. */
      status: (server: ServerDefinition) => Effect.map(monotonicMillis, (now) => status(server, now))
    }
  })
}) {}
