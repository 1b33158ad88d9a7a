/**
 * `--check`: load everything once, print every problem of every file (and what could not be checked because of
 * them) or a summary, and return the exit code.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { formatHostPort } from "../schema/HostPort.js"
import { formatProblem } from "../schema/problems.js"
import { loadConfiguration } from "../services/config/fileStore.js"
import type { DiscoveryCheck } from "../services/ContainerDiscovery.js"
import { displayPath } from "../services/config/load.js"
import { inactiveFeatureLines, summarize, warningLines } from "./Startup.js"

/**
 * What discovery would do now. Not a problem of the configuration: the runtime may be elsewhere when `--check` runs,
 * and containers come and go; so these lines go to stdout and leave the exit code alone.
 */
const containerLines = (found: DiscoveryCheck): Array<string> => {
  if (Either.isLeft(found.answer)) {
    return [`containers: ${found.endpoint} does not answer: ${found.answer.left}; Portal keeps trying while it runs`]
  }
  const servers = found.servers
  return [
    `containers: ${found.endpoint} answers (${found.answer.right}): ${servers.length} server${servers.length === 1 ? "" : "s"} from containers` +
      (servers.length > 0 ? ` (${servers.map((server) => server.id).join(", ")})` : ""),
    ...servers.map(
      (server) =>
        `  ${server.id} from ${server.file}: ${server.config.domains.length > 0 ? server.config.domains.join(", ") : "(no domains)"} -> ` +
        server.config.addresses.map((address) => formatHostPort(address)).join(", ")
    ),
    ...found.problems.map((problem) => `containers: ${formatProblem(problem)} (container skipped)`)
  ]
}

export const runCheck = (configFile: string) =>
  Effect.gen(function* () {
    const loaded = yield* Effect.either(loadConfiguration(configFile, { createSecrets: false }))
    if (Either.isLeft(loaded)) {
      for (const problem of loaded.left.problems) process.stderr.write(`${formatProblem(problem)}\n`)
      for (const note of loaded.left.notes ?? []) process.stderr.write(`note: ${note}\n`)
      process.stderr.write(`${loaded.left.problems.length} problem(s) found\n`)
      return 1
    }
    const { snapshot, secret } = loaded.right
    process.stdout.write(`${summarize(snapshot)}\n`)
    if (secret === "missing") {
      process.stdout.write(
        `note: ${displayPath(snapshot.global.forwarding.secret_file)} does not exist yet; Portal creates it at startup\n`
      )
    }
    for (const line of inactiveFeatureLines(snapshot)) process.stdout.write(`note: ${line}\n`)
    for (const line of warningLines(snapshot)) process.stdout.write(`warning: ${line}\n`)
    const containers = snapshot.global.containers
    if (containers !== undefined) {
      const { checkContainers } = yield* Effect.promise(() => import("../services/ContainerDiscovery.js"))
      const found = yield* checkContainers(containers, configFile, [...snapshot.servers.values()])
      for (const line of containerLines(found)) process.stdout.write(`${line}\n`)
    }
    return 0
  }).pipe(Effect.provide(Layer.merge(NodeFileSystem.layer, FetchHttpClient.layer)))
