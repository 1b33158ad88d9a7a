/** What Portal says about its configuration when it starts and when `--check` runs. */
import * as Effect from "effect/Effect"
import { formatHostPort } from "../schema/HostPort.js"
import type { ConfigSnapshot } from "../services/ConfigStore.js"
import { displayPath } from "../services/config/load.js"
import { configurationWarningLines, inactiveFeatures } from "../services/config/features.js"

export const summarize = (snapshot: ConfigSnapshot): string => {
  const servers = [...snapshot.servers.values()]
  const domains = servers.reduce((count, server) => count + server.config.domains.length, 0)
  const ids = servers.map((server) => server.id).join(", ")
  return (
    `${displayPath(snapshot.configFile)} is valid: ${servers.length} server${servers.length === 1 ? "" : "s"}` +
    (servers.length > 0 ? ` (${ids})` : "") +
    `, ${domains} domain${domains === 1 ? "" : "s"}, bind ${formatHostPort(snapshot.global.bind)}`
  )
}

export const inactiveFeatureLines = (snapshot: ConfigSnapshot): Array<string> =>
  inactiveFeatures(snapshot.global, snapshot.servers.values()).map(
    (feature) => `configured but not active yet: ${feature.where}: ${feature.what}`
  )

/** Settings that work but probably not as meant (a client_only server without forwarding, ...). */
export const warningLines = (snapshot: ConfigSnapshot): Array<string> =>
  configurationWarningLines(snapshot.global, snapshot.servers.values())

export const logStartup = (snapshot: ConfigSnapshot) =>
  Effect.gen(function* () {
    yield* Effect.logInfo(summarize(snapshot).replace(" is valid:", " loaded:"))
    for (const server of snapshot.servers.values()) {
      yield* Effect.logInfo(
        `server ${server.id}: ${server.config.domains.length > 0 ? server.config.domains.join(", ") : "(no domains: not routable)"} -> ` +
          server.config.addresses.map((address) => formatHostPort(address)).join(", ") +
          ` [${server.config.proxy_mode}, ${server.config.balance}]`
      )
    }
    for (const line of inactiveFeatureLines(snapshot)) yield* Effect.logWarning(line)
    for (const line of warningLines(snapshot)) yield* Effect.logWarning(line)
  })
