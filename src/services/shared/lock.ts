/**
 * A spinlock in shared memory for critical sections of a few hundred nanoseconds: two Int32 words, the lock
 * (0 free, else the holder's id, a thread's ledger index + 1, so that a dead holder can be named and its lock
 * freed) and the number of threads sleeping on it. A thread spins briefly, then sleeps with Atomics.wait so that a
 * holder descheduled by the OS does not cost a core; the releaser wakes a sleeper only when there is one (a notify
 * costs a mutex in V8). Sleeps are bounded (1 ms) so that a lock freed by `forceUnlock` is noticed without a notify.
 *
 * Nothing inside a critical section may throw: callers wrap their section in try/finally all the same, so that a
 * bug cannot leave every thread waiting.
 */

const SPINS = 128
const SLEEP_MS = 1

/** Takes the lock at `words[at]` for `holder` (> 0), waiting as long as it takes. */
export const lock = (words: Int32Array, at: number, holder: number): void => {
  if (Atomics.compareExchange(words, at, 0, holder) === 0) return
  for (;;) {
    for (let i = 0; i < SPINS; i++) {
      if (Atomics.load(words, at) === 0 && Atomics.compareExchange(words, at, 0, holder) === 0) return
    }
    Atomics.add(words, at + 1, 1)
    const current = Atomics.load(words, at)
    if (current !== 0) Atomics.wait(words, at, current, SLEEP_MS)
    Atomics.sub(words, at + 1, 1)
    if (Atomics.compareExchange(words, at, 0, holder) === 0) return
  }
}

/**
 * Takes the lock, waiting at most `timeoutMs`; false when it could not. The control thread uses this: it must never
 * wait for ever behind a worker that died holding the lock, since it is the one that frees such a lock.
 */
export const lockWithin = (words: Int32Array, at: number, holder: number, timeoutMs: number): boolean => {
  if (Atomics.compareExchange(words, at, 0, holder) === 0) return true
  const deadline = performance.now() + timeoutMs
  for (;;) {
    for (let i = 0; i < SPINS; i++) {
      if (Atomics.load(words, at) === 0 && Atomics.compareExchange(words, at, 0, holder) === 0) return true
    }
    if (performance.now() >= deadline) return false
    Atomics.add(words, at + 1, 1)
    const current = Atomics.load(words, at)
    if (current !== 0) Atomics.wait(words, at, current, SLEEP_MS)
    Atomics.sub(words, at + 1, 1)
    if (Atomics.compareExchange(words, at, 0, holder) === 0) return true
  }
}

/** Frees the lock (the caller holds it). */
export const unlock = (words: Int32Array, at: number): void => {
  Atomics.store(words, at, 0)
  if (Atomics.load(words, at + 1) > 0) Atomics.notify(words, at, 1)
}

/** Frees the lock if `holder` holds it (a thread that died inside a critical section); whether it did. */
export const forceUnlock = (words: Int32Array, at: number, holder: number): boolean => {
  if (Atomics.compareExchange(words, at, holder, 0) !== holder) return false
  Atomics.notify(words, at)
  return true
}

/** Who holds the lock: 0 when free, else the holder's id. */
export const holderOf = (words: Int32Array, at: number): number => Atomics.load(words, at)
