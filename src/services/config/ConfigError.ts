import * as Data from "effect/Data"
import { type ConfigProblem, formatProblem } from "../../schema/problems.js"

/**
 * One or more configuration problems, each naming file, key path and reason; `notes` say what could not be checked
 * because of them (the server files, when `proxy.toml` hides where they are).
 */
export class ConfigError extends Data.TaggedError("ConfigError")<{
  readonly problems: ReadonlyArray<ConfigProblem>
  readonly notes?: ReadonlyArray<string>
}> {
  override get message(): string {
    return [...this.problems.map(formatProblem), ...(this.notes ?? []).map((note) => `note: ${note}`)].join("\n")
  }
}
