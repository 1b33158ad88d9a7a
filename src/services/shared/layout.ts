/**
 * The shape of the shared memory: capacities, and the SharedArrayBuffers sized from them. Everything here is
 * reserved, never touched: a SharedArrayBuffer's pages are committed by the OS when first written, and every
 * structure is laid out so that zero means empty, so memory is paid for as it is used (SharedState.ts gives the
 * byte costs).
 */

/** What the shared state is sized for. */
export interface SharedCapacities {
  /** Worker threads, each with its own ledger; the control thread has one more, at index `workers`. */
  readonly workers: number
  /** Client addresses tracked at once (rate-limit windows and handshakes in progress). */
  readonly ipSlots: number
  /** Chunks of event times (8 times each) for all addresses together. */
  readonly ipChunks: number
  /** Handshakes in progress one thread can hold at once (its ledger's size). */
  readonly handshakesPerWorker: number
  /** Backend servers with a slot (player counts, balancer locks). */
  readonly serverSlots: number
  /** Backend addresses with a slot (balancer state, least_conn counts). */
  readonly addressSlots: number
}

/** The capacities with what is derived from them. */
export interface SharedLayout extends SharedCapacities {
  /** Ledgers: one per worker plus the control thread's. */
  readonly ledgers: number
  /** Hash buckets of the address table: a power of two, at least `ipSlots`. */
  readonly ipBuckets: number
}

/** Addresses tracked: today's bound per limit (RateLimiter's MAX_TRACKED_ADDRESSES), for both windows at once. */
export const DEFAULT_IP_SLOTS = 100_000
/**
 * Time chunks: one per window for every address (2 x 100,000), that is 1.6 million event places, between one of
 * today's limiters (MAX_STORED_EVENTS, 1,000,000) and both of them.
 */
export const DEFAULT_IP_CHUNKS = 200_000
/** A thread holds at most the proxy-wide bound on handshakes in progress (RateLimiter's MAX_PENDING_HANDSHAKES). */
export const DEFAULT_HANDSHAKES_PER_WORKER = 1024
export const DEFAULT_SERVER_SLOTS = 4096
export const DEFAULT_ADDRESS_SLOTS = 16_384

/** Int32 words per address slot (key, chains, handshakes, two windows). */
export const IP_SLOT_WORDS = 16
/** Event times per chunk. */
export const CHUNK_TIMES = 8
/** Int32 words of the address table's header (lock, allocators, LRU ends, totals). */
export const IP_HEADER_WORDS = 16
/** Int32 words per address slot in the balancer (active, failures, flags, spare). */
export const BALANCER_INT_WORDS = 4
/** Float64 values per address slot in the balancer (currentWeight, ejectedUntil, recoveredAt, lastPicked). */
export const BALANCER_FLOAT_WORDS = 4
/** Int32 words per server lock (the lock and its waiter count). */
export const SERVER_LOCK_WORDS = 2

const positiveInt = (name: string, value: number, min: number): number => {
  if (!Number.isInteger(value) || value < min || value > 0x3fffffff) {
    throw new RangeError(`shared state: ${name} must be an integer from ${min}, got ${value}`)
  }
  return value
}

/** The layout for `options`, with the defaults above; a RangeError for a capacity that is not a positive integer. */
export const layoutFor = (options: Partial<SharedCapacities> & { readonly workers: number }): SharedLayout => {
  const workers = positiveInt("workers", options.workers, 1)
  const ipSlots = positiveInt("ipSlots", options.ipSlots ?? DEFAULT_IP_SLOTS, 1)
  let ipBuckets = 1
  while (ipBuckets < ipSlots) ipBuckets *= 2
  return {
    workers,
    ledgers: workers + 1,
    ipSlots,
    ipBuckets,
    ipChunks: positiveInt("ipChunks", options.ipChunks ?? DEFAULT_IP_CHUNKS, 1),
    handshakesPerWorker: positiveInt("handshakesPerWorker", options.handshakesPerWorker ?? DEFAULT_HANDSHAKES_PER_WORKER, 1),
    serverSlots: positiveInt("serverSlots", options.serverSlots ?? DEFAULT_SERVER_SLOTS, 1),
    addressSlots: positiveInt("addressSlots", options.addressSlots ?? DEFAULT_ADDRESS_SLOTS, 1)
  }
}

/**
 * The shared memory and its layout: structured-cloneable, so it travels to a worker in `workerData` (the buffers are
 * shared, not copied). Address table slots and chunks count from 1 (0 is the null link); server and address slots
 * of the balancer and the counters count from 0.
 */
export interface SharedBuffers {
  readonly layout: SharedLayout
  /** Int32 x IP_HEADER_WORDS. */
  readonly ipHeader: SharedArrayBuffer
  /** Int32 x IP_SLOT_WORDS per slot, slots 1..ipSlots. */
  readonly ipSlots: SharedArrayBuffer
  /** Int32 per bucket: the first slot of its chain. */
  readonly ipBuckets: SharedArrayBuffer
  /** Float64 x CHUNK_TIMES per chunk, chunks 1..ipChunks. */
  readonly ipTimes: SharedArrayBuffer
  /** Int32 per chunk: the next chunk of its chain (or of the free list). */
  readonly ipChunkNext: SharedArrayBuffer
  /** Int32 per ledger entry (the address slot of a handshake in progress), handshakesPerWorker per ledger. */
  readonly ipLedger: SharedArrayBuffer
  /** Int32: connections (total, then one per ledger), players (per server slot, then per ledger and server slot). */
  readonly counters: SharedArrayBuffer
  /** Int32: BALANCER_INT_WORDS per address slot, least_conn ledgers per ledger and address slot, server locks. */
  readonly balancerInts: SharedArrayBuffer
  /** Float64: BALANCER_FLOAT_WORDS per address slot, then a pick counter per server slot. */
  readonly balancerFloats: SharedArrayBuffer
}

/** Word offsets in `counters`. */
export const countersLayout = (layout: SharedLayout) => {
  const connections = 0
  const connectionLedgers = 1
  const players = connectionLedgers + layout.ledgers
  const playerLedgers = players + layout.serverSlots
  const words = playerLedgers + layout.ledgers * layout.serverSlots
  return { connections, connectionLedgers, players, playerLedgers, words }
}

/** Word offsets in `balancerInts` and `balancerFloats`. */
export const balancerLayout = (layout: SharedLayout) => {
  const addresses = 0
  const activeLedgers = layout.addressSlots * BALANCER_INT_WORDS
  const serverLocks = activeLedgers + layout.ledgers * layout.addressSlots
  const intWords = serverLocks + layout.serverSlots * SERVER_LOCK_WORDS
  const picks = layout.addressSlots * BALANCER_FLOAT_WORDS
  const floatWords = picks + layout.serverSlots
  return { addresses, activeLedgers, serverLocks, intWords, picks, floatWords }
}

/** Reserves the buffers for `layout` (nothing is written but the table's hash seed). */
export const allocateBuffers = (layout: SharedLayout): SharedBuffers => {
  const int32 = (words: number) => new SharedArrayBuffer(words * 4)
  const float64 = (values: number) => new SharedArrayBuffer(values * 8)
  const counters = countersLayout(layout)
  const balancer = balancerLayout(layout)
  return {
    layout,
    ipHeader: int32(IP_HEADER_WORDS),
    ipSlots: int32((layout.ipSlots + 1) * IP_SLOT_WORDS),
    ipBuckets: int32(layout.ipBuckets),
    ipTimes: float64((layout.ipChunks + 1) * CHUNK_TIMES),
    ipChunkNext: int32(layout.ipChunks + 1),
    ipLedger: int32(layout.ledgers * layout.handshakesPerWorker),
    counters: int32(counters.words),
    balancerInts: int32(balancer.intWords),
    balancerFloats: float64(balancer.floatWords)
  }
}
