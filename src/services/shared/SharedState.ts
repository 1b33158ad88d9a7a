/**
 * SharedState: the state every data-plane thread reads and writes synchronously, in one SharedArrayBuffer, so that
 * limits stay proxy-wide and exact however many worker threads there are: the per-address table of `[rate_limit]`
 * windows and handshakes in progress (IpTable), the connection and per-server player counters (counters.ts), and
 * the balancer's per-address state (balancerState.ts). Slot numbers for servers and addresses come from
 * SlotAllocator (control thread).
 *
 * The control thread makes it once (`createSharedState`) and passes `buffers` to each worker in `workerData`; a
 * worker calls `attachSharedState(buffers, index)`. Each thread writes its own ledger (index 0..workers-1 for
 * workers, `workers` for the control thread), so that when a worker dies the control thread gives back everything
 * it held with `releaseWorker(index)`, before a replacement takes the same index. A worker that dies by an exception
 * or `process.exit` dies between operations (nothing inside a critical section throws), so recovery is exact; one
 * stopped by `Worker.terminate()` in the middle of a critical section (a few hundred ns) may leave that update half
 * done (a count off by one, at worst an address table list half relinked): let a failing worker exit rather than
 * terminate it, where there is the choice.
 *
 * Memory. Everything is reserved up front in one SharedArrayBuffer and touched only as it is used: its pages are
 * committed by the OS on first write (layout.ts, MIN_BYTES, says why it is never smaller than 32 MiB), nothing is
 * initialised (zero is empty), and slots and chunks come from bump allocators then free lists, so the pages in use
 * stay together. Byte costs, defaults in brackets:
 * - address table (IpTable): a slot of 64 B per address tracked [100,000 slots: 6.4 MB]; a chunk of 68 B (8 times of
 *   8 B, and a 4 B link) per window holding 1 to 8 events [200,000 chunks: 13.6 MB]; 4 B per hash bucket, the next
 *   power of two above the slots [131,072: 512 KiB, all of it touched once a few thousand addresses are in];
 *   4 B per handshake ledger entry [1,024 per thread]; a 64 B header. Full: 20.5 MB, where RateLimiter's two maps
 *   could reach about 30 MB each.
 * - one address: 64 B, plus 68 B per window with events (up to 8 events each): 132 B with one event, 200 B with a
 *   login and a ping. 60,000 addresses with one event each: 8.4 MB (8.0 MiB) with the buckets (measured by
 *   test/services/shared/memory.test.ts).
 * - counters: 4 B for connections (and 4 B of flags set once, onceFlags.ts) and a 64 B line per ledger; 4 B per server slot and 4 B per server slot per ledger
 *   [4,096 server slots: 16 KiB, and 16 KiB per thread].
 * - balancer: 48 B per address slot and 4 B per address slot per ledger [16,384 slots: 768 KiB, and 64 KiB per
 *   thread]; 16 B per server slot (lock and pick counter) [64 KiB].
 * - players online in the packet modes (onlinePlayers.ts): 24 B per slot [32,768 slots: 768 KiB], touched as
 *   players are let in, and a 64 B header.
 * - in all, with the defaults and 2 workers: 22.5 MB of content in a 32 MiB reservation (address space only). An
 *   empty state costs about 20 KiB of RSS (the views and the pages of the table's header); the rest is paid per
 *   address, server and session as they come.
 *
 * Speed (bench/shared-state.mjs, this shared 2-core machine, for an address already in the table): on one thread
 * `hit` 0.10 to 0.15 µs, `enterHandshake` with its release 0.14 to 0.22 µs, `connections.enter` / `players.admit` /
 * `balancer.acquire` with their releases 0.07 to 0.1 µs; with 2 threads hammering the same table at once, `hit`
 * 0.27 to 0.34 µs and `enterHandshake` with its release 0.24 to 0.67 µs per call and thread (the lock contended).
 */
import { ConnectionCounter, PlayerCounter } from "./counters.js"
import { IpTable, seedIpTable } from "./IpTable.js"
import { allocateBuffers, layoutFor, type SharedBuffers, type SharedCapacities } from "./layout.js"
import { SharedBalancer } from "./balancerState.js"
import { OnlinePlayers, seedOnlinePlayers } from "./onlinePlayers.js"
import { OnceFlags } from "./onceFlags.js"

export type { AddressEntry, IpTableStats, RateKind } from "./IpTable.js"
export type { SharedBuffers, SharedCapacities, SharedLayout } from "./layout.js"
export type { Release } from "./places.js"

/** What `createSharedState` takes: the number of workers, and capacities where the defaults do not fit. */
export type SharedStateOptions = Partial<SharedCapacities> & { readonly workers: number }

/** What `releaseWorker` gave back. */
export interface WorkerRelease {
  /** Handshakes in progress; undefined when the address table stayed locked (call releaseWorker again). */
  readonly handshakes: number | undefined
  readonly connections: number
  readonly players: number
  /** least_conn session counts. */
  readonly sessions: number
  /** Players it had let in (packet modes); undefined when that table stayed locked (call releaseWorker again). */
  readonly online: number | undefined
  /** Locks the worker held when it died (address table, server locks). */
  readonly locksFreed: number
}

/** One thread's views of the shared state. */
export interface SharedState {
  /** What a worker needs to attach: pass it in `workerData`. */
  readonly buffers: SharedBuffers
  /** The ledger this thread writes: 0..workers-1 for a worker, `workers` for the control thread. */
  readonly worker: number
  readonly ipTable: IpTable
  readonly connections: ConnectionCounter
  readonly players: PlayerCounter
  readonly balancer: SharedBalancer
  readonly online: OnlinePlayers
  /** Flags set once proxy-wide (a line logged once whatever thread sees its cause first). */
  readonly once: OnceFlags
  /**
   * Gives back everything `worker` held and frees the locks it held (control thread, after that worker died and
   * before a replacement attaches with the same index).
   */
  readonly releaseWorker: (worker: number) => WorkerRelease
}

/**
 * Reserves the shared state for `options.workers` workers (control thread, once) and returns the control thread's
 * views (ledger index `workers`). Capacities default to layout.ts's; a RangeError for one that is not a positive
 * integer (a bug, not an input).
 */
export const createSharedState = (options: SharedStateOptions): SharedState => {
  const buffers = allocateBuffers(layoutFor(options))
  seedIpTable(buffers)
  seedOnlinePlayers(buffers)
  return attachSharedState(buffers, buffers.layout.workers)
}

/** A thread's views of state made by `createSharedState`; `worker` is its ledger index (0..workers). */
export const attachSharedState = (buffers: SharedBuffers, worker: number): SharedState => {
  const { workers } = buffers.layout
  if (!Number.isInteger(worker) || worker < 0 || worker > workers) {
    throw new RangeError(`shared state: worker index ${worker} is outside 0..${workers}`)
  }
  const ipTable = new IpTable(buffers, worker)
  const connections = new ConnectionCounter(buffers, worker)
  const players = new PlayerCounter(buffers, worker)
  const balancer = new SharedBalancer(buffers, worker)
  const online = new OnlinePlayers(buffers, worker)
  const releaseWorker = (dead: number): WorkerRelease => {
    const locksFreed = Number(ipTable.forceUnlock(dead)) + balancer.forceUnlock(dead)
    return {
      handshakes: ipTable.releaseWorker(dead),
      connections: connections.releaseWorker(dead),
      players: players.releaseWorker(dead),
      sessions: balancer.releaseWorker(dead),
      online: online.releaseWorker(dead),
      locksFreed
    }
  }
  return { buffers, worker, ipTable, connections, players, balancer, online, once: new OnceFlags(buffers), releaseWorker }
}
