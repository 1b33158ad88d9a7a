import * as Data from "effect/Data"
import { type ConfigProblem, formatProblem } from "../../schema/problems.js"

/** One or more configuration problems, each naming file, key path and reason. */
export class ConfigError extends Data.TaggedError("ConfigError")<{ readonly problems: ReadonlyArray<ConfigProblem> }> {
  override get message(): string {
    return this.problems.map(formatProblem).join("\n")
  }
}
