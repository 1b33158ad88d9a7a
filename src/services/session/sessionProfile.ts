/**
 * The session service's answer to `hasJoined` (200): `{"id": "<32 hex>", "name", "properties": [{name, value,
 * signature?}]}`, a null signature being an unsigned property. Loaded with a dynamic import on the first client_only
 * login (session/authentication.ts): Schema is more memory than a data plane that never authenticates should carry.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { describeParseError } from "../parseIssue.js"

const Property = Schema.Struct({
  name: Schema.String,
  value: Schema.String,
  // Absent when unsigned; some services write null instead, which Mojang's authlib (Gson) reads the same way.
  signature: Schema.optional(Schema.NullOr(Schema.String))
})

export const SessionProfile = Schema.Struct({
  id: Schema.String.pipe(Schema.pattern(/^[0-9a-fA-F]{32}$/)),
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(16)),
  properties: Schema.optionalWith(Schema.Array(Property), { default: () => [] })
}).annotations({ identifier: "SessionProfile" })

export type SessionProfile = typeof SessionProfile.Type

const decode = Schema.decodeUnknownEither(SessionProfile)

/** The profile in the text of a 200 answer, or why it is not one. */
export const decodeSessionProfile = (text: string): Either.Either<SessionProfile, string> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return Either.left(`not JSON: ${JSON.stringify(text.slice(0, 80))}`)
  }
  return Either.mapLeft(decode(json, { onExcessProperty: "ignore" }), describeParseError)
}
