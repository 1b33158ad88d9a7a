/**
 * The base of the errors a peer causes every day (malformed bytes, a read that timed out, a connection closed early):
 * a `Data.TaggedError` made without a stack trace. Scanners and floods make them by the thousand a second, and under
 * a flood of garbage capturing their stacks was the largest single cost of refusing a connection (about a fifth of
 * the CPU, and the garbage it left); their message says everything a log line needs.
 */
import * as Data from "effect/Data"

type TaggedErrorClass<Tag extends string> = ReturnType<typeof Data.TaggedError<Tag>>

export const QuietError = <Tag extends string>(tag: Tag): TaggedErrorClass<Tag> => {
  // Any fields here: the class is returned as Data.TaggedError's own generic class, which types them.
  class Quiet extends Data.TaggedError(tag)<Record<string, unknown>> {
    constructor(args: Record<string, unknown>) {
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
