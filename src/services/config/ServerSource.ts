/**
 * The seam through which servers that are not files join the configuration (container discovery). A source
 * publishes its current servers; ConfigStore merges them after the files' servers whenever either changes, and
 * files win: a sourced server with the id or a domain of a file (or of a sourced server before it) is reported,
 * naming both, and left out. ConfigStore reads this service when it is present and does nothing otherwise.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { findServerConflicts, type ServerDefinition } from "../../schema/decode.js"
import type { ConfigProblem } from "../../schema/problems.js"

export class ServerSource extends Context.Tag("portal/ServerSource")<
  ServerSource,
  {
    /** The source's servers, in its order of precedence (the first of two that clash is kept). */
    readonly servers: SubscriptionRef.SubscriptionRef<ReadonlyArray<ServerDefinition>>
  }
>() {
  /** An empty source, filled by whoever discovers servers once the configuration is loaded. */
  static readonly layer = Layer.effect(
    ServerSource,
    Effect.map(SubscriptionRef.make<ReadonlyArray<ServerDefinition>>([]), (servers) => ({ servers }))
  )
}

/**
 * The files' servers (already free of conflicts among themselves) followed by the sourced servers that clash with
 * none before them; the problems name the server left out and the one it clashes with.
 */
export const mergeSourcedServers = (
  files: ReadonlyArray<ServerDefinition>,
  sourced: ReadonlyArray<ServerDefinition>
): { readonly servers: Array<ServerDefinition>; readonly problems: Array<ConfigProblem> } => {
  if (sourced.length === 0) return { servers: [...files], problems: [] }
  const all = [...files, ...sourced]
  const conflicts = findServerConflicts(all)
  // A container's keys are labels: name them as the container's owner wrote them.
  const labelled = new Set(sourced.filter((server) => server.source._tag === "Container").map((server) => server.file))
  const problems = conflicts.problems.map((problem) =>
    labelled.has(problem.file) && problem.path.length > 0 ? { ...problem, path: `label portal.${problem.path}` } : problem
  )
  return { servers: all.filter((server) => !conflicts.rejected.has(server)), problems }
}
