/**
 * Router: the domain index. Exact domains beat wildcards; among wildcards the longest suffix wins.
 * `*.example.com` matches any depth below `example.com`, never `example.com` itself.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ServerDefinition } from "../schema/decode.js"
import { type ConfigSnapshot, ConfigStore } from "./ConfigStore.js"

export interface DomainIndex {
  readonly exact: ReadonlyMap<string, ServerDefinition>
  /** Keyed by the suffix after `*.` */
  readonly wildcard: ReadonlyMap<string, ServerDefinition>
}

export const buildDomainIndex = (servers: Iterable<ServerDefinition>): DomainIndex => {
  const exact = new Map<string, ServerDefinition>()
  const wildcard = new Map<string, ServerDefinition>()
  for (const server of servers) {
    for (const domain of server.config.domains) {
      if (domain.startsWith("*.")) wildcard.set(domain.slice(2), server)
      else exact.set(domain, server)
    }
  }
  return { exact, wildcard }
}

/** Looks a normalised host up: exact first, then each parent suffix from the longest. */
export const resolveHost = (index: DomainIndex, host: string): ServerDefinition | undefined => {
  const exact = index.exact.get(host)
  if (exact !== undefined) return exact
  let dot = host.indexOf(".")
  while (dot >= 0) {
    const match = index.wildcard.get(host.slice(dot + 1))
    if (match !== undefined) return match
    dot = host.indexOf(".", dot + 1)
  }
  return undefined
}

/** The connection path's surface: synchronous, called for every handshake. */
export interface RouterDataPlane {
  /** The server a normalised host routes to in `snapshot`, if any. */
  readonly resolve: (snapshot: ConfigSnapshot, host: string) => ServerDefinition | undefined
}

export class Router extends Effect.Service<Router>()("portal/Router", {
  effect: Effect.gen(function* () {
    const store = yield* ConfigStore
    // One index per configuration snapshot, built on first use.
    const indexes = new WeakMap<ConfigSnapshot, DomainIndex>()
    const indexFor = (snapshot: ConfigSnapshot) => {
      let index = indexes.get(snapshot)
      if (index === undefined) {
        index = buildDomainIndex(snapshot.servers.values())
        indexes.set(snapshot, index)
      }
      return index
    }
    const dataPlane: RouterDataPlane = { resolve: (snapshot, host) => resolveHost(indexFor(snapshot), host) }
    return {
      dataPlane,
      /** The server a normalised host routes to now. */
      resolve: (host: string): Effect.Effect<Option.Option<ServerDefinition>> =>
        Effect.map(store.get, (snapshot) => Option.fromNullable(dataPlane.resolve(snapshot, host)))
    }
  })
}) {}
