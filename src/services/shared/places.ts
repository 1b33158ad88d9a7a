/**
 * Counted places in shared Int32 words, taken and given back with Atomics (no lock): a check-and-increment with
 * compareExchange, so two threads can never both take the last place under a limit.
 *
 * A word holds a count (low COUNT_BITS bits) and a generation (the high bits). Resetting a slot for a new owner (a
 * server or address slot given to another key) bumps the generation, so that places taken under the old owner and
 * given back late change nothing. Each thread also counts what it took in its own ledger word (same encoding), so
 * that the places of a thread that died can be given back.
 */

/** Gives back what was taken; calling it again does nothing. */
export type Release = () => void

export const COUNT_BITS = 22
/** The largest count a word can hold (about 4 million). */
export const COUNT_MASK = (1 << COUNT_BITS) - 1
const GENERATIONS = 1 << (32 - COUNT_BITS)

export const countOf = (word: number): number => word & COUNT_MASK
export const generationOf = (word: number): number => word >>> COUNT_BITS

/**
 * Takes one place at `words[at]` when fewer than `max` are taken (`max` 0: no limit); the generation it was taken
 * under, or -1 when refused.
 */
export const take = (words: Int32Array, at: number, max: number): number => {
  for (;;) {
    const word = Atomics.load(words, at)
    const count = word & COUNT_MASK
    if ((max > 0 && count >= max) || count === COUNT_MASK) return -1
    if (Atomics.compareExchange(words, at, word, word + 1) === word) return word >>> COUNT_BITS
  }
}

/** Gives back one place taken under `generation`; false when the slot was reset since (nothing to give back). */
export const giveBack = (words: Int32Array, at: number, generation: number): boolean => {
  for (;;) {
    const word = Atomics.load(words, at)
    if (word >>> COUNT_BITS !== generation || (word & COUNT_MASK) === 0) return false
    if (Atomics.compareExchange(words, at, word, word - 1) === word) return true
  }
}

/** Gives back `count` places taken under `generation` at once (a dead thread's); how many were given back. */
export const giveBackMany = (words: Int32Array, at: number, generation: number, count: number): number => {
  for (;;) {
    const word = Atomics.load(words, at)
    if (word >>> COUNT_BITS !== generation) return 0
    const given = Math.min(count, word & COUNT_MASK)
    if (given === 0) return 0
    if (Atomics.compareExchange(words, at, word, word - given) === word) return given
  }
}

/**
 * Records in a thread's ledger word one place taken under `generation`: a ledger still on an older generation
 * (its slot was reset) starts again from zero.
 */
export const record = (words: Int32Array, at: number, generation: number): void => {
  for (;;) {
    const word = Atomics.load(words, at)
    const next = word >>> COUNT_BITS === generation ? word + 1 : (generation << COUNT_BITS) | 1
    if (Atomics.compareExchange(words, at, word, next) === word) return
  }
}

/** Empties `words[at]` under a new generation; the generation it now has. */
export const resetPlaces = (words: Int32Array, at: number): number => {
  for (;;) {
    const word = Atomics.load(words, at)
    const generation = ((word >>> COUNT_BITS) + 1) % GENERATIONS
    if (Atomics.compareExchange(words, at, word, generation << COUNT_BITS) === word) return generation
  }
}

/** Empties a ledger word for `generation`, unless a thread already recorded a place under it. */
export const resetLedger = (words: Int32Array, at: number, generation: number): void => {
  for (;;) {
    const word = Atomics.load(words, at)
    if (word >>> COUNT_BITS === generation) return
    if (Atomics.compareExchange(words, at, word, generation << COUNT_BITS) === word) return
  }
}

/**
 * Gives back everything one ledger word holds (its thread died) to the shared word; how many places. The ledger
 * word is left empty.
 */
export const releaseLedger = (words: Int32Array, shared: number, ledger: number): number => {
  const word = Atomics.load(words, ledger)
  const count = word & COUNT_MASK
  if (count === 0) return 0
  const generation = word >>> COUNT_BITS
  Atomics.store(words, ledger, generation << COUNT_BITS)
  return giveBackMany(words, shared, generation, count)
}
