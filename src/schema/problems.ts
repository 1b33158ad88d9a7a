/** Configuration problems: where (file, key path) and why, with "did you mean" for misspelled keys. */
import * as ParseResult from "effect/ParseResult"

export interface ConfigProblem {
  readonly file: string
  /** Dotted key path (`motd.online.text`, `addresses[1].weight`), or "" for the whole file. */
  readonly path: string
  readonly message: string
}

export const formatProblem = (problem: ConfigProblem): string =>
  problem.path.length > 0 ? `${problem.file}: ${problem.path}: ${problem.message}` : `${problem.file}: ${problem.message}`

/** Edit distance where a swap of two neighbouring letters counts once (optimal string alignment). */
export const editDistance = (a: string, b: string): number => {
  const d: Array<Array<number>> = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0))
  )
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1)
      d[i]![j] = best
    }
  }
  return d[a.length]![b.length]!
}

/** The closest allowed key when it is a near miss (a typo, not a different word). */
export const suggestKey = (key: string, allowed: ReadonlyArray<string>): string | undefined => {
  let best: string | undefined
  let bestDistance = Infinity
  for (const candidate of allowed) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase())
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  const tolerance = Math.max(1, Math.floor(Math.max(key.length, 3) / 3))
  return best !== undefined && bestDistance <= tolerance ? best : undefined
}

const formatPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((out, segment) => {
    if (typeof segment === "number") return `${out}[${segment}]`
    const text = String(segment)
    const bare = /^[A-Za-z0-9_-]+$/.test(text) ? text : JSON.stringify(text)
    return out.length === 0 ? bare : `${out}.${bare}`
  }, "")

const EXPECTED_KEYS = /is unexpected, expected: (.*)$/
const GENERIC_LITERALS = /^Expected ((?:"[^"]*"(?: \| )?)+), actual "(.*)"$/
const ONE_OF = /^expected one of ((?:"[^"]*"(?:, )?)+), got "(.*)"$/

const GENERIC_TYPES: ReadonlyArray<readonly [RegExp, string]> = [
  [/^Expected (?:ReadonlyArray|Array)<.*>, actual (.*)$/s, "expected an array, got $1"],
  [/^Expected string, actual (.*)$/s, "expected a string, got $1"],
  [/^Expected (?:number|NonNegativeInt|PositiveInt), actual (.*)$/s, "expected a number, got $1"],
  [/^Expected boolean, actual (.*)$/s, "expected true or false, got $1"],
  [/^Expected an integer, actual (.*)$/s, "expected an integer, got $1"],
  [/^Expected (?:\{.*\}|[A-Z]\w*(?: \(\w+ side\))?), actual (.*)$/s, "expected a table, got $1"]
]

/** Effect's generic type messages in the words of a configuration file. */
const explainTypeMismatch = (message: string): string => {
  for (const [pattern, replacement] of GENERIC_TYPES) if (pattern.test(message)) return message.replace(pattern, replacement)
  return message
}

/** `Expected "a" | "b", actual "x"` becomes `expected one of "a", "b", got "x"`, with a suggestion for a near miss. */
const explainLiteralMismatch = (message: string): string => {
  const match = GENERIC_LITERALS.exec(message) ?? ONE_OF.exec(message)
  if (match === null) return message
  const allowed = [...match[1]!.matchAll(/"([^"]*)"/g)].map((m) => m[1]!)
  const suggestion = suggestKey(match[2]!, allowed)
  return (
    `expected one of ${allowed.map((v) => JSON.stringify(v)).join(", ")}, got "${match[2]}"` +
    (suggestion !== undefined ? ` (did you mean "${suggestion}"?)` : "")
  )
}

/** Turns a schema decoding error into problems, one per offending key path. */
export const problemsFromParseError = (file: string, error: ParseResult.ParseError): Array<ConfigProblem> => {
  const seen = new Set<string>()
  const problems: Array<ConfigProblem & { readonly generic: boolean }> = []
  for (const issue of ParseResult.ArrayFormatter.formatErrorSync(error)) {
    let message = issue.message
    const unexpected = issue._tag === "Unexpected" ? EXPECTED_KEYS.exec(message) : null
    if (unexpected !== null) {
      const allowed = [...unexpected[1]!.matchAll(/"([^"]+)"/g)].map((m) => m[1]!)
      const key = String(issue.path[issue.path.length - 1] ?? "")
      const suggestion = suggestKey(key, allowed)
      message =
        allowed.length === 0
          ? // A table of ids (`[plugins.<id>]`): the key is an id of the wrong shape, not a misspelled option.
            `${JSON.stringify(key)} is not a valid id${issue.path[0] === "plugins" ? ": plugin ids must match [a-z0-9_-]+" : ""}`
          : `unknown key${suggestion !== undefined ? ` (did you mean "${suggestion}"?)` : ""}; allowed keys: ` + allowed.join(", ")
    } else if (issue._tag === "Missing") {
      message = "is required"
    } else {
      message = explainTypeMismatch(explainLiteralMismatch(message))
    }
    const problem = { file, path: formatPath(issue.path), message, generic: /^Expected /.test(issue.message) }
    const id = formatProblem(problem)
    if (!seen.has(id)) {
      seen.add(id)
      problems.push(problem)
    }
  }
  return dropUnionNoise(problems).map(({ file, path, message }) => ({ file, path, message }))
}

/**
 * A key that accepts several shapes (`"host:port"` or a table) reports one failure per shape; when one of them
 * names something below the same path, that deeper problem is the precise one and the shape mismatch adds nothing.
 */
const dropUnionNoise = <P extends ConfigProblem & { readonly generic: boolean }>(problems: Array<P>): Array<P> =>
  problems.filter(
    (problem) =>
      !problems.some(
        (other) =>
          other !== problem &&
          problem.path.length > 0 &&
          (other.path.startsWith(problem.path + ".") ||
            other.path.startsWith(problem.path + "[") ||
            // Effect's generic "Expected <Schema>, actual ..." next to Portal's own wording for the same key.
            (other.path === problem.path && problem.generic && !other.generic))
      )
  )
