/**
 * The base of the errors a peer causes every day (malformed bytes, a read that timed out, a connection closed early):
 * a `Data.TaggedError` made without a stack trace. Scanners and floods make them by the thousand a second, and under
 * a flood of garbage capturing their stacks was the largest single cost of refusing a connection (about a fifth of
 * the CPU, and the garbage it left); their message says everything a log line needs.
 */
import * as Data from "effect/Data"

type TaggedErrorClass<Tag extends string> = ReturnType<typeof Data.TaggedError<Tag>>

export const QuietError = <Tag extends string>(tag: Tag): TaggedErrorClass<Tag> => {
  // `any` only inside: the class returned has exactly Data.TaggedError's type.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  class Quiet extends Data.TaggedError(tag)<any> {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    constructor(args: any) {
      const limit = Error.stackTraceLimit
      Error.stackTraceLimit = 0
      try {
        super(args)
      } finally {
        Error.stackTraceLimit = limit
      }
    }
  }
  return Quiet as unknown as TaggedErrorClass<Tag>
}
