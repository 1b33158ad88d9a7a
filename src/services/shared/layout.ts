/**
 * The shape of the shared memory: capacities, and one SharedArrayBuffer sized from them, cut into page-aligned
 * regions. Everything here is reserved, never touched: the buffer's pages are committed by the OS when first written
 * (see MIN_BYTES), and every structure is laid out so that zero means empty, so memory is paid for as it is used
 * (SharedState.ts gives the byte costs).
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
  /** Slots of the table of players online in the packet modes: a power of two, filled to three quarters at most. */
  readonly onlineSlots: number
}

/** The regions of the shared memory, each an Int32 or Float64 array. */
export type RegionName =
  | "ipHeader"
  | "ipSlots"
  | "ipBuckets"
  | "ipTimes"
  | "ipChunkNext"
  | "ipLedger"
  | "counters"
  | "balancerInts"
  | "balancerFloats"
  | "onlineHeader"
  | "onlineSlots"

/** Where a region is in the shared memory: byte offset (page-aligned) and length in elements. */
export interface Region {
  readonly offset: number
  readonly length: number
}

/** The capacities with what is derived from them. */
export interface SharedLayout extends SharedCapacities {
  /** Ledgers: one per worker plus the control thread's. */
  readonly ledgers: number
  /** Hash buckets of the address table: a power of two, at least `ipSlots`. */
  readonly ipBuckets: number
  readonly regions: Readonly<Record<RegionName, Region>>
  /** Bytes of the one SharedArrayBuffer (see MIN_BYTES). */
  readonly bytes: number
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
/** 24,576 players online in the packet modes at once (three quarters of it), at 24 B a slot: 768 KiB reserved. */
export const DEFAULT_ONLINE_SLOTS = 32_768

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
/** Int32 words per slot of the players-online table (holder, UUID, claim serial). */
export const ONLINE_SLOT_WORDS = 6
/** Int32 words of the players-online table's header (lock, seed, count, serial). */
export const ONLINE_HEADER_WORDS = 16
/** Int32 words per server lock (the lock and its waiter count). */
export const SERVER_LOCK_WORDS = 2

const positiveInt = (name: string, value: number, min: number): number => {
  if (!Number.isInteger(value) || value < min || value > 0x3fffffff) {
    throw new RangeError(`shared state: ${name} must be an integer from ${min}, got ${value}`)
  }
  return value
}

const powerOfTwo = (name: string, value: number): number => {
  const checked = positiveInt(name, value, 4)
  if ((checked & (checked - 1)) !== 0) throw new RangeError(`shared state: ${name} must be a power of two, got ${value}`)
  return checked
}

/**
 * The one SharedArrayBuffer is at least this big (32 MiB + 64 KiB). Node allocates a SharedArrayBuffer with calloc;
 * glibc serves a request above its mmap threshold with fresh mmap'd pages, which are committed lazily and not
 * cleared, but the threshold grows (up to 32 MiB) as the process frees large blocks, and a request under it is
 * carved from the heap and cleared with memset, committing all of it. Above 32 MiB the memory is always mmap'd, so
 * reserving it costs address space only, whatever the process allocated and freed before.
 */
export const MIN_BYTES = 32 * 1024 * 1024 + 64 * 1024

const PAGE = 4096

/** Word offsets in `counters`: a connection ledger per cache line, so that threads do not share one. */
export const countersLayout = (layout: SharedCapacities & { readonly ledgers: number }) => {
  const connections = 0
  /** Bits set once proxy-wide (onceFlags.ts), in the connection counter's cache line, which has room to spare. */
  const once = 1
  const connectionLedgers = 16
  const ledgerStride = 16
  const players = connectionLedgers + layout.ledgers * ledgerStride
  const playerLedgers = players + layout.serverSlots
  const words = playerLedgers + layout.ledgers * layout.serverSlots
  return { connections, once, connectionLedgers, ledgerStride, players, playerLedgers, words }
}

/** Word offsets in `balancerInts` and `balancerFloats`. */
export const balancerLayout = (layout: SharedCapacities & { readonly ledgers: number }) => {
  const addresses = 0
  const activeLedgers = layout.addressSlots * BALANCER_INT_WORDS
  const serverLocks = activeLedgers + layout.ledgers * layout.addressSlots
  const intWords = serverLocks + layout.serverSlots * SERVER_LOCK_WORDS
  const picks = layout.addressSlots * BALANCER_FLOAT_WORDS
  const floatWords = picks + layout.serverSlots
  return { addresses, activeLedgers, serverLocks, intWords, picks, floatWords }
}

/**
 * The layout for `options`, with the defaults above. A capacity that is not a positive integer is a bug in the
 * caller (they are constants, or a decoded worker count): a RangeError.
 */
export const layoutFor = (options: Partial<SharedCapacities> & { readonly workers: number }): SharedLayout => {
  const workers = positiveInt("workers", options.workers, 1)
  const ipSlots = positiveInt("ipSlots", options.ipSlots ?? DEFAULT_IP_SLOTS, 1)
  let ipBuckets = 1
  while (ipBuckets < ipSlots) ipBuckets *= 2
  const capacities = {
    workers,
    ledgers: workers + 1,
    ipSlots,
    ipChunks: positiveInt("ipChunks", options.ipChunks ?? DEFAULT_IP_CHUNKS, 1),
    handshakesPerWorker: positiveInt("handshakesPerWorker", options.handshakesPerWorker ?? DEFAULT_HANDSHAKES_PER_WORKER, 1),
    serverSlots: positiveInt("serverSlots", options.serverSlots ?? DEFAULT_SERVER_SLOTS, 1),
    addressSlots: positiveInt("addressSlots", options.addressSlots ?? DEFAULT_ADDRESS_SLOTS, 1),
    onlineSlots: powerOfTwo("onlineSlots", options.onlineSlots ?? DEFAULT_ONLINE_SLOTS)
  }
  // Elements and their size per region, laid out one after the other, each from a page boundary.
  const sizes: ReadonlyArray<readonly [RegionName, number, 4 | 8]> = [
    ["ipHeader", IP_HEADER_WORDS, 4],
    ["ipSlots", (ipSlots + 1) * IP_SLOT_WORDS, 4],
    ["ipBuckets", ipBuckets, 4],
    ["ipTimes", (capacities.ipChunks + 1) * CHUNK_TIMES, 8],
    ["ipChunkNext", capacities.ipChunks + 1, 4],
    ["ipLedger", capacities.ledgers * capacities.handshakesPerWorker, 4],
    ["counters", countersLayout(capacities).words, 4],
    ["balancerInts", balancerLayout(capacities).intWords, 4],
    ["balancerFloats", balancerLayout(capacities).floatWords, 8],
    ["onlineHeader", ONLINE_HEADER_WORDS, 4],
    ["onlineSlots", capacities.onlineSlots * ONLINE_SLOT_WORDS, 4]
  ]
  const regions = {} as Record<RegionName, Region>
  let offset = 0
  for (const [name, length, size] of sizes) {
    regions[name] = { offset, length }
    offset += Math.ceil((length * size) / PAGE) * PAGE
  }
  return { ...capacities, ipBuckets, regions, bytes: Math.max(offset, MIN_BYTES) }
}

/**
 * The shared memory and its layout: structured-cloneable, so it travels to a worker in `workerData` (the memory is
 * shared, not copied). Address table slots and chunks count from 1 (0 is the null link); server and address slots
 * of the balancer and the counters count from 0.
 */
export interface SharedBuffers {
  readonly layout: SharedLayout
  readonly memory: SharedArrayBuffer
}

/** Reserves the memory for `layout` (nothing is written). */
export const allocateBuffers = (layout: SharedLayout): SharedBuffers => ({ layout, memory: new SharedArrayBuffer(layout.bytes) })

/** A region as Int32 words. */
export const int32View = (buffers: SharedBuffers, name: RegionName): Int32Array => {
  const region = buffers.layout.regions[name]
  return new Int32Array(buffers.memory, region.offset, region.length)
}

/** A region as Float64 values. */
export const float64View = (buffers: SharedBuffers, name: RegionName): Float64Array => {
  const region = buffers.layout.regions[name]
  return new Float64Array(buffers.memory, region.offset, region.length)
}
