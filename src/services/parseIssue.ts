/**
 * Schema's account of why outside data (a backend's status JSON, a provider API's answer) was refused, made into
 * one short line for a log or a state reason: the first issue, with its path, quoting at most a bounded part of
 * what the peer sent.
 */
import * as ParseResult from "effect/ParseResult"

/** How much of a peer's text a reason may quote. */
const REASON_CHARS = 200

/** One line, printable, bounded: a reason ends up in a log line and quotes a peer. */
export const oneLine = (text: string): string => {
  // eslint-disable-next-line no-control-regex
  const flat = text.replace(/[\u0000-\u001f\u007f]+/g, " ")
  return flat.length > REASON_CHARS ? `${flat.slice(0, REASON_CHARS)}...` : flat
}

/** `players.max: expected number, got "20"`: the first issue of a decode, where it is and what it found. */
export const describeParseError = (error: ParseResult.ParseError): string => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  if (issue === undefined) return "not what was expected"
  const message = issue.message.replace(/^Expected /, "expected ").replace(/, actual /, ", got ")
  return oneLine(issue.path.length === 0 ? message : `${issue.path.join(".")}: ${message}`)
}
