/**
 * Calls across threads: a message with an id goes out, the reply with the same id settles the call. Bounded in
 * time, so a thread that never answers (stopping, crashed) fails the call instead of leaving it waiting.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"

export class CallFailed extends Data.TaggedError("CallFailed")<{ readonly what: string; readonly reason: string }> {
  override get message() {
    return `${this.what}: ${this.reason}`
  }
}

export interface Calls {
  /**
   * Sends the message `build(id)` makes and waits for the reply to `id`. The reply is the other thread's answer to
   * this very call (a value of Portal's own, never outside data), so it is taken as the type the caller expects.
   */
  readonly call: <A>(what: string, timeoutMs: number, build: (id: number) => unknown) => Effect.Effect<A, CallFailed>
  /** Delivers a reply; a reply nobody waits for (timed out, interrupted) is dropped. */
  readonly settle: (id: number, value: unknown) => void
  /** Fails every call in flight (the other side is gone). */
  readonly failAll: (reason: string) => void
}

export const makeCalls = (post: (message: unknown) => void): Calls => {
  const pending = new Map<number, { readonly resolve: (value: unknown) => void; readonly fail: (reason: string) => void }>()
  let next = 0
  return {
    call: <A>(what: string, timeoutMs: number, build: (id: number) => unknown) =>
      Effect.async<A, CallFailed>((resume) => {
        const id = ++next
        const timer = setTimeout(() => {
          pending.delete(id)
          resume(Effect.fail(new CallFailed({ what, reason: `no answer within ${timeoutMs} ms` })))
        }, timeoutMs)
        pending.set(id, {
          resolve: (value) => {
            clearTimeout(timer)
            resume(Effect.succeed(value as A))
          },
          fail: (reason) => {
            clearTimeout(timer)
            resume(Effect.fail(new CallFailed({ what, reason })))
          }
        })
        try {
          post(build(id))
        } catch (error) {
          pending.delete(id)
          clearTimeout(timer)
          resume(Effect.fail(new CallFailed({ what, reason: error instanceof Error ? error.message : String(error) })))
        }
        return Effect.sync(() => {
          clearTimeout(timer)
          pending.delete(id)
        })
      }),
    settle: (id, value) => {
      const waiting = pending.get(id)
      if (waiting === undefined) return
      pending.delete(id)
      waiting.resolve(value)
    },
    failAll: (reason) => {
      const all = [...pending.values()]
      pending.clear()
      for (const waiting of all) waiting.fail(reason)
    }
  }
}
