/**
 * SlotAllocator: stable slot numbers for a configuration's servers and backend addresses, so that shared state
 * (player counts, balancer state, least_conn counts) is found by index on every thread. Plain JS, control thread
 * only.
 *
 * A key keeps its slot across reloads for as long as it is configured, and after it leaves the configuration until
 * the slot is given to another key. A slot whose key left is given to a new key only after a grace period (sessions
 * of a removed server or address are still ending; their late releases are made harmless by the reset), oldest
 * first, before never-used slots (so that the memory touched stays compact); it is reset when reassigned. An
 * assignment that does not fit changes nothing and says why.
 */
import * as Data from "effect/Data"
import * as Either from "effect/Either"

/** How long a slot whose key left the configuration stays reserved for that key (ms). */
export const SLOT_GRACE_MS = 60_000

/** The key of a backend address: its server and `host:port`. */
export const addressKey = (serverId: string, hostPort: string): string => `${serverId}|${hostPort}`

export class SlotCapacityExceeded extends Data.TaggedError("SlotCapacityExceeded")<{
  readonly reason: string
  readonly kind: "server" | "address"
  readonly capacity: number
  /** Keys in the configuration of this kind. */
  readonly wanted: number
}> {}

export interface SlotAssignment {
  /** Server id -> server slot, for every server of the configuration. */
  readonly servers: ReadonlyMap<string, number>
  /** Address key ("serverId|host:port") -> address slot, for every address of the configuration. */
  readonly addresses: ReadonlyMap<string, number>
  /** Slots given to a new key by this assignment that had another key before (and were reset). */
  readonly reset: { readonly servers: ReadonlyArray<number>; readonly addresses: ReadonlyArray<number> }
}

export interface SlotAllocatorOptions {
  readonly serverSlots: number
  readonly addressSlots: number
  readonly graceMs?: number
  /** Called for each server slot given to a new key after another (PlayerCounter.reset, SharedBalancer.resetServer). */
  readonly resetServer?: (slot: number) => void
  /** Called for each address slot given to a new key after another (e.g. SharedBalancer.reset). */
  readonly resetAddress?: (slot: number) => void
}

/** One kind of slot (servers or addresses): who holds what, and which slots are waiting out their grace. */
class SlotPool {
  /** Key -> slot, for keys configured now and keys that left but whose slot was not reassigned yet. */
  private readonly slots = new Map<string, number>()
  /** Slot -> key holding it. */
  private readonly owners = new Map<number, string>()
  /** Slots whose key left the configuration, with when it left (insertion order = oldest first). */
  private readonly retired = new Map<number, number>()
  private used = 0

  constructor(
    readonly kind: "server" | "address",
    readonly capacity: number
  ) {}

  /** The plan for `keys`, or the reason it does not fit; nothing changes yet. */
  plan(keys: ReadonlySet<string>, nowMs: number, graceMs: number): Either.Either<Plan, SlotCapacityExceeded> {
    const fresh: Array<string> = []
    for (const key of keys) if (!this.slots.has(key)) fresh.push(key)
    // Slots whose key left now, or had left, and will not return in this configuration.
    const leaving: Array<number> = []
    for (const [key, slot] of this.slots) if (!keys.has(key) && !this.retired.has(slot)) leaving.push(slot)
    const reusable: Array<number> = []
    let waiting = 0
    for (const [slot, since] of this.retired) {
      if (keys.has(this.owners.get(slot)!)) continue
      if (nowMs - since >= graceMs) reusable.push(slot)
      else waiting += 1
    }
    const neverUsed = this.capacity - this.used
    if (fresh.length > reusable.length + neverUsed) {
      const inGrace = waiting + leaving.length
      const plural = this.kind === "server" ? "servers" : "addresses"
      return Either.left(
        new SlotCapacityExceeded({
          kind: this.kind,
          capacity: this.capacity,
          wanted: keys.size,
          reason:
            `${keys.size} ${plural} configured (${fresh.length} new), but only ${reusable.length + neverUsed} of the ` +
            `${this.capacity} ${this.kind} slots are free` +
            (inGrace > 0 ? `; ${inGrace} more become free ${graceMs / 1000} s after their ${this.kind} left the configuration` : "")
        })
      )
    }
    return Either.right({ fresh, leaving, reusable })
  }

  /** Applies a plan made by `plan` for the same keys; the slots reassigned from another key. */
  apply(keys: ReadonlySet<string>, plan: Plan, nowMs: number): { readonly map: Map<string, number>; readonly reset: Array<number> } {
    for (const slot of plan.leaving) this.retired.set(slot, nowMs)
    // Keys that came back keep their slot and leave the retired list.
    for (const key of keys) {
      const slot = this.slots.get(key)
      if (slot !== undefined) this.retired.delete(slot)
    }
    const reset: Array<number> = []
    let reuse = 0
    for (const key of plan.fresh) {
      let slot: number
      if (reuse < plan.reusable.length) {
        slot = plan.reusable[reuse++]!
        this.retired.delete(slot)
        this.slots.delete(this.owners.get(slot)!)
        reset.push(slot)
      } else {
        slot = this.used++
      }
      this.slots.set(key, slot)
      this.owners.set(slot, key)
    }
    const map = new Map<string, number>()
    for (const key of keys) map.set(key, this.slots.get(key)!)
    return { map, reset }
  }
}

interface Plan {
  readonly fresh: ReadonlyArray<string>
  readonly leaving: ReadonlyArray<number>
  readonly reusable: ReadonlyArray<number>
}

export class SlotAllocator {
  private readonly servers: SlotPool
  private readonly addresses: SlotPool
  private readonly graceMs: number

  constructor(private readonly options: SlotAllocatorOptions) {
    this.servers = new SlotPool("server", options.serverSlots)
    this.addresses = new SlotPool("address", options.addressSlots)
    this.graceMs = options.graceMs ?? SLOT_GRACE_MS
  }

  /**
   * Slots for a configuration's server ids and address keys (see `addressKey`) at `nowMs`: stable for keys seen
   * before, reset hooks called for slots taken over from a key that left. When either kind does not fit, nothing
   * changes and the error says which and why.
   */
  assign(serverIds: Iterable<string>, addressKeys: Iterable<string>, nowMs: number): Either.Either<SlotAssignment, SlotCapacityExceeded> {
    const serverKeys = new Set(serverIds)
    const addressKeySet = new Set(addressKeys)
    const serverPlan = this.servers.plan(serverKeys, nowMs, this.graceMs)
    if (Either.isLeft(serverPlan)) return Either.left(serverPlan.left)
    const addressPlan = this.addresses.plan(addressKeySet, nowMs, this.graceMs)
    if (Either.isLeft(addressPlan)) return Either.left(addressPlan.left)
    const servers = this.servers.apply(serverKeys, serverPlan.right, nowMs)
    const addresses = this.addresses.apply(addressKeySet, addressPlan.right, nowMs)
    for (const slot of servers.reset) this.options.resetServer?.(slot)
    for (const slot of addresses.reset) this.options.resetAddress?.(slot)
    return Either.right({ servers: servers.map, addresses: addresses.map, reset: { servers: servers.reset, addresses: addresses.reset } })
  }
}
