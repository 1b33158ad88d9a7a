/**
 * Waiting for something to become empty (the relays running, the connection fibers), as shutdown does: `wait`
 * resumes at once when it is empty, else at the first `wakeIfEmpty` that finds it empty (the owner calls it after
 * each removal); an interrupted wait leaves nothing behind.
 */
import * as Effect from "effect/Effect"

export interface EmptyWaiters {
  readonly wait: Effect.Effect<void>
  /** Resumes every wait if it is empty now; the owner calls it after each removal. */
  readonly wakeIfEmpty: () => void
}

export const emptyWaiters = (isEmpty: () => boolean): EmptyWaiters => {
  let waiting: Array<() => void> = []
  const wait = Effect.async<void>((resume) => {
    if (isEmpty()) return resume(Effect.void)
    const resolve = () => resume(Effect.void)
    waiting.push(resolve)
    return Effect.sync(() => {
      waiting = waiting.filter((entry) => entry !== resolve)
    })
  })
  const wakeIfEmpty = () => {
    if (waiting.length === 0 || !isEmpty()) return
    const woken = waiting
    waiting = []
    for (const resolve of woken) resolve()
  }
  return { wait, wakeIfEmpty }
}
