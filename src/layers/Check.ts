/**
 * `--check`: load everything once, print every problem of every file (and what could not be checked because of
 * them) or a summary, and return the exit code.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { formatProblem } from "../schema/problems.js"
import { loadConfiguration } from "../services/ConfigStore.js"
import { displayPath } from "../services/config/load.js"
import { inactiveFeatureLines, summarize, warningLines } from "./Startup.js"

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
    return 0
  }).pipe(Effect.provide(Layer.merge(NodeFileSystem.layer, FetchHttpClient.layer)))
