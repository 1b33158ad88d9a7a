/**
 * A backend's status answer, decoded with Schema: the text must be JSON, and the JSON an object. Only the fields
 * Portal reads are checked (`version`, `players`, `description`, `favicon`), and loosely: every other field, at any
 * depth, is kept as the backend sent it, since mods add their own (`forgeData`, `modinfo`, `enforcesSecureChat`...).
 *
 * A field Portal reads with the wrong type (`"version": "1.21"`, `"players": {"max": "20"}`) fails the whole answer
 * rather than being dropped: the player gets the stale or `unreachable` answer, as for any failed fetch, and the
 * operator one warning naming the field, instead of a server list entry silently missing its version or counts.
 * No real server sends such an answer (vanilla, Paper, Forge, Fabric, Velocity and BungeeCord all write these
 * fields with these types and omit, rather than null, what they do not have).
 *
 * Nesting is bounded too: the answer is written out again with JSON.stringify, which recurses, and a frame of
 * 786 KB can nest arrays 390,000 deep, far past the stack.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { StatusJson } from "../../protocol/status.js"
import { describeParseError, oneLine } from "../parseIssue.js"

const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { exact: true })

const SamplePlayer = Schema.Struct({ name: Schema.String, id: Schema.String }).annotations({ title: "an object { name, id }" })

const Version = Schema.Struct({ name: Schema.String, protocol: Schema.Number }).annotations({ title: "an object { name, protocol }" })

const Players = Schema.Struct({
  max: Schema.Number,
  online: Schema.Number,
  sample: optional(Schema.Array(SamplePlayer))
}).annotations({ title: "an object { max, online, sample? }" })

/** The index signature keeps the fields nobody checks; `description` is a string or a text component, kept as is. */
export const BackendStatusJson = Schema.Struct(
  {
    version: optional(Version),
    players: optional(Players),
    description: optional(Schema.Unknown),
    favicon: optional(Schema.String)
  },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
).annotations({ title: "a JSON object" })

/** Deeper than any real answer (text components with their `extra`, Forge's mod lists nest a few levels). */
export const MAX_STATUS_DEPTH = 128

/** The deepest nesting of objects and arrays in a JSON text, counted without recursion (strings skipped). */
const nestingOf = (text: string): number => {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // a backslash: the next character is escaped
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x7b || c === 0x5b) deepest = Math.max(deepest, ++depth)
    else if (c === 0x7d || c === 0x5d) depth--
  }
  return deepest
}

const parseJson = Schema.decodeEither(Schema.parseJson())
// `preserve` keeps unknown keys inside the checked objects too (a `version` with extra fields stays whole).
const decodeObject = Schema.decodeUnknownEither(BackendStatusJson, { onExcessProperty: "preserve" })

/** The status JSON in `text`, or the reason it is not one (a single line, for the log). */
export const decodeStatusJson = (text: string): Either.Either<StatusJson, string> =>
  nestingOf(text) > MAX_STATUS_DEPTH
    ? Either.left(`not a status answer: nested deeper than ${MAX_STATUS_DEPTH} levels`)
    : Either.match(parseJson(text), {
        onLeft: (error) => Either.left(oneLine(`not JSON (${describeParseError(error)})`)),
        onRight: (json) => Either.mapLeft(decodeObject(json), (error) => oneLine(`not a status answer: ${describeParseError(error)}`))
      })
