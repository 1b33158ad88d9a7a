/**
 * Balancer: which backend address a login tries first. Keeps per-address state (live sessions, round robin
 * weights, passive ejection after failed connects, active health, slow start after recovery).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { ServerDefinition } from "../schema/decode.js"
import { formatHostPort } from "../schema/HostPort.js"
import type { BackendAddress } from "../schema/ServerConfig.js"
import { type AddressState, ejectionMillis, freshState, orderCandidates } from "./balancer/strategy.js"
import { monotonicMillis } from "./monotonicClock.js"
import { releaseOnce } from "./once.js"

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
  readonly succeeded: (serverId: string, address: BackendAddress, now: number) => void
  /** A connect failed: eject the address for a growing back-off. */
  readonly failed: (serverId: string, address: BackendAddress, now: number) => void
  /** Counts a live session on an address for least_conn until the returned release is called (idempotent). */
  readonly acquire: (serverId: string, address: BackendAddress) => () => void
  /** Whether any address passes the active health check (true for servers without one). */
  readonly anyHealthy: (server: ServerDefinition) => boolean
}

export class Balancer extends Effect.Service<Balancer>()("portal/Balancer", {
  effect: Effect.sync(() => {
    // Mutated synchronously inside Effect.sync: state changes at connection rate and must be read in the same tick.
    const servers = new Map<string, Map<string, AddressState>>()

    const stateOf = (serverId: string, address: BackendAddress | string): AddressState => {
      const key = typeof address === "string" ? address : formatHostPort(address)
      let perServer = servers.get(serverId)
      if (perServer === undefined) servers.set(serverId, (perServer = new Map()))
      let state = perServer.get(key)
      if (state === undefined) perServer.set(key, (state = freshState()))
      return state
    }

    /** Forgets addresses a server no longer lists (after a reload), keeping live counts of the rest. */
    const prune = (server: ServerDefinition) => {
      const perServer = servers.get(server.id)
      if (perServer === undefined) return
      const listed = new Set(server.config.addresses.map(formatHostPort))
      for (const key of perServer.keys()) if (!listed.has(key)) perServer.delete(key)
    }

    /** The addresses in the order a login tries them, as of `now` (synchronous: this runs for every login). */
    const orderAt = (server: ServerDefinition, now: number): ReadonlyArray<BackendAddress> => {
      prune(server)
      const candidates = server.config.addresses.map((address) => ({ address, state: stateOf(server.id, address) }))
      const slowStart =
        server.config.slow_start === undefined
          ? undefined
          : { windowMs: Duration.toMillis(server.config.slow_start), aggression: server.config.slow_start_aggression }
      return orderCandidates(server.config.balance, candidates, now, slowStart).map((candidate) => candidate.address)
    }

    /** A connect succeeded: the address is trusted again (and ramps up if it had been failing). */
    const succeededAt = (serverId: string, address: BackendAddress, now: number): void => {
      const state = stateOf(serverId, address)
      if (state.failures > 0) markRecovered(state, now)
      state.failures = 0
      state.ejectedUntil = 0
    }

    /** A connect failed: eject the address for a growing back-off. */
    const failedAt = (serverId: string, address: BackendAddress, now: number): void => {
      const state = stateOf(serverId, address)
      state.failures += 1
      state.ejectedUntil = now + ejectionMillis(state.failures)
    }

    /** Counts a live session on an address for least_conn until the returned release is called (idempotent). */
    const acquireNow = (serverId: string, address: BackendAddress): (() => void) => {
      stateOf(serverId, address).active += 1
      return releaseOnce(() => {
        const state = servers.get(serverId)?.get(formatHostPort(address))
        if (state !== undefined && state.active > 0) state.active -= 1
      })
    }

    const markRecovered = (state: AddressState, now: number) => {
      state.recoveredAt = now
      state.currentWeight = 0
    }

    const healthyAny = (server: ServerDefinition): boolean =>
      server.config.addresses.some((address) => stateOf(server.id, address).healthy)

    const dataPlane: BalancerDataPlane = {
      order: orderAt,
      succeeded: succeededAt,
      failed: failedAt,
      acquire: acquireNow,
      anyHealthy: healthyAny
    }

    return {
      dataPlane,
      /** The active health check's verdict for an address. */
      setHealth: (serverId: string, address: BackendAddress, healthy: boolean) =>
        Effect.map(monotonicMillis, (now) => {
          const state = stateOf(serverId, address)
          if (healthy && !state.healthy) markRecovered(state, now)
          state.healthy = healthy
          if (healthy) {
            state.failures = 0
            state.ejectedUntil = 0
          }
        }),
      /** Whether any address passes the active health check (true for servers without one). */
      anyHealthy: (server: ServerDefinition) => Effect.sync(() => healthyAny(server)),
      status: (server: ServerDefinition) =>
        Effect.map(monotonicMillis, (now): ReadonlyArray<AddressStatus> =>
          server.config.addresses.map((address) => {
            const state = stateOf(server.id, address)
            return {
              address: formatHostPort(address),
              weight: address.weight,
              active: state.active,
              healthy: state.healthy,
              ejectedUntil: state.ejectedUntil > now ? state.ejectedUntil : undefined,
              failures: state.failures
            }
          })
        )
    }
  })
}) {}
