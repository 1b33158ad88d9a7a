/**
 * What an HTTP client's transport failure comes down to. fetch reports "Transport error" over "fetch failed" over the
 * system's reason: the socket error's code (`ECONNREFUSED`, `ENOTFOUND`) is what tells an operator anything.
 */
import * as Predicate from "effect/Predicate"

/** The most telling part of a transport failure: the socket error's code (`ECONNREFUSED`), else a message. */
export const describeTransport = (error: { readonly message: string; readonly cause?: unknown }): string => {
  const cause = error.cause
  const inner = Predicate.hasProperty(cause, "cause") ? cause.cause : undefined
  if (Predicate.hasProperty(inner, "code") && Predicate.isString(inner.code)) return inner.code
  if (Predicate.hasProperty(inner, "message") && Predicate.isString(inner.message)) return inner.message
  if (Predicate.hasProperty(cause, "message") && Predicate.isString(cause.message)) return cause.message
  return error.message
}
