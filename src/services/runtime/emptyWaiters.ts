/**
 * Waiting for something to become empty (the relays running, the connection fibers), as shutdown does: `wait`
 * resumes at once when it is empty, else at the next `wake` (called by the owner once it is); an interrupted wait
 * leaves nothing behind.
 */
import * as Effect from "effect/Effect"

export interface EmptyWaiters {
  readonly wait: Effect.Effect<void>
  /** Resumes every wait; the owner calls it when it has become empty. */
  readonly wake: () => void
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
  const wake = () => {
    const woken = waiting
    waiting = []
    for (const resolve of woken) resolve()
  }
  return { wait, wake }
}
