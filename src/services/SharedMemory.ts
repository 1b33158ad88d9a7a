/**
 * SharedMemory: the state every data-plane thread reads and writes synchronously (services/shared/): per-IP rate
 * windows and handshakes in progress, connection and player counts, the balancer's per-address state. The main
 * thread creates it (`layer`); a worker thread attaches to it (`layerAttached`).
 *
 * Where each server and address lives in it (its slots) is part of the configuration the data plane sees: the
 * main thread's ConfigStore is wrapped (`slotting`) so that every snapshot it publishes carries each server's
 * `slots`, assigned by one SlotAllocator; workers get them with the snapshot.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type { ServerDefinition } from "../schema/decode.js"
import { formatHostPort } from "../schema/HostPort.js"
import { type ConfigSnapshot, ConfigStore } from "./ConfigStore.js"
import { attachSharedState, createSharedState, type SharedBuffers, type SharedState } from "./shared/SharedState.js"
import { addressKey, SlotAllocator } from "./shared/SlotAllocator.js"

export class SharedMemory extends Context.Tag("portal/SharedMemory")<SharedMemory, SharedState>() {
  /** The main thread's: the shared state for `workers` worker threads (the main thread has a ledger of its own). */
  static readonly layer = (workers: number) => Layer.sync(SharedMemory, () => createSharedState({ workers: Math.max(1, workers) }))

  /** A worker thread's view of the main thread's state. */
  static readonly layerAttached = (buffers: SharedBuffers, index: number) =>
    Layer.sync(SharedMemory, () => attachSharedState(buffers, index))

  /**
   * The configuration with slots: wraps the ConfigStore below it so that every snapshot's servers carry their
   * slots. A server keeps its slots across reloads; one whose slots cannot be had (the capacity is exceeded) is
   * logged and runs with state of its own thread.
   */
  static readonly slotting = Layer.scoped(
    ConfigStore,
    Effect.gen(function* () {
      const base = yield* ConfigStore
      const state = yield* SharedMemory
      const clock = yield* Effect.clock
      const allocator = new SlotAllocator({
        serverSlots: state.buffers.layout.serverSlots,
        addressSlots: state.buffers.layout.addressSlots,
        resetServer: (slot) => state.players.reset(slot),
        resetAddress: (slot) => state.balancer.reset(slot)
      })
      /** Slotted definitions, reused while a server's definition and slots are unchanged (caches key on them). */
      const slotted = new WeakMap<ServerDefinition, ServerDefinition>()

      const withSlots = (snapshot: ConfigSnapshot) =>
        Effect.gen(function* () {
          const servers = [...snapshot.servers.values()]
          const keysOf = (server: ServerDefinition) => server.config.addresses.map((address) => addressKey(server.id, formatHostPort(address)))
          const assigned = allocator.assign(
            servers.map((server) => server.id),
            servers.flatMap(keysOf),
            clock.unsafeCurrentTimeMillis()
          )
          if (Either.isLeft(assigned)) {
            yield* Effect.logError(`shared state: ${assigned.left.reason}; these servers' limits count per thread`)
            return snapshot
          }
          const next = new Map<string, ServerDefinition>()
          for (const server of servers) {
            const slot = assigned.right.servers.get(server.id)!
            const addresses = keysOf(server).map((key) => assigned.right.addresses.get(key) ?? -1)
            const known = slotted.get(server)
            const same =
              known?.slots !== undefined && known.slots.server === slot && known.slots.addresses.every((a, i) => a === addresses[i])
            const definition = same ? known! : { ...server, slots: { server: slot, addresses } }
            slotted.set(server, definition)
            next.set(server.id, definition)
          }
          return { ...snapshot, servers: next }
        })

      const current = yield* SubscriptionRef.make(yield* withSlots(yield* base.get))
      // Every change, the first included: one made between the read above and the subscription is not lost.
      yield* base.changes.pipe(
        Stream.mapEffect(withSlots),
        Stream.runForEach((snapshot) => SubscriptionRef.set(current, snapshot)),
        Effect.forkScoped
      )
      // A reload returns once its result is published here too, so that whoever asked for it sees it at once.
      const caughtUp = Effect.flatMap(base.get, (published) =>
        current.changes.pipe(
          Stream.filter((snapshot) => snapshot.revision >= published.revision),
          Stream.runHead,
          Effect.asVoid
        )
      )
      return {
        current,
        get: SubscriptionRef.get(current),
        changes: current.changes,
        rescanServers: Effect.zipRight(base.rescanServers, caughtUp),
        reloadGlobal: Effect.zipRight(base.reloadGlobal, caughtUp)
      }
    })
  )
}
