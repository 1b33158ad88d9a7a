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

const parseJson = Schema.decodeEither(Schema.parseJson())
// `preserve` keeps unknown keys inside the checked objects too (a `version` with extra fields stays whole).
const decodeObject = Schema.decodeUnknownEither(BackendStatusJson, { onExcessProperty: "preserve" })

/** The status JSON in `text`, or the reason it is not one (a single line, for the log). */
export const decodeStatusJson = (text: string): Either.Either<StatusJson, string> =>
  Either.match(parseJson(text), {
    onLeft: (error) => Either.left(oneLine(`not JSON (${describeParseError(error)})`)),
    onRight: (json) => Either.mapLeft(decodeObject(json), (error) => oneLine(`not a status answer: ${describeParseError(error)}`))
  })
