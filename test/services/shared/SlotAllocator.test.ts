/** Slot numbers across reloads: stable keys, the grace before reuse, resets, capacity errors. */
import * as Either from "effect/Either"
import { describe, expect, it } from "vitest"
import { addressKey, SlotAllocator, type SlotAssignment } from "../../../src/services/shared/SlotAllocator.js"

const assigned = (result: ReturnType<SlotAllocator["assign"]>): SlotAssignment => {
  if (Either.isLeft(result)) throw new Error(result.left.reason)
  return result.right
}

const setup = (serverSlots = 4, addressSlots = 8) => {
  const resets = { servers: [] as Array<number>, addresses: [] as Array<number> }
  const allocator = new SlotAllocator({
    serverSlots,
    addressSlots,
    graceMs: 60_000,
    resetServer: (slot) => resets.servers.push(slot),
    resetAddress: (slot) => resets.addresses.push(slot)
  })
  return { allocator, resets }
}

describe("SlotAllocator", () => {
  it("keeps each key's slot across reloads, whatever the order", () => {
    const { allocator } = setup()
    const first = assigned(allocator.assign(["lobby", "survival"], [addressKey("lobby", "10.0.0.1:25565")], 0))
    expect([...first.servers]).toEqual([["lobby", 0], ["survival", 1]])
    expect([...first.addresses]).toEqual([["lobby|10.0.0.1:25565", 0]])
    const second = assigned(allocator.assign(["creative", "survival", "lobby"], ["lobby|10.0.0.1:25565", "lobby|10.0.0.2:25565"], 1000))
    expect([...second.servers]).toEqual([["creative", 2], ["survival", 1], ["lobby", 0]])
    expect(second.addresses.get("lobby|10.0.0.2:25565")).toBe(1)
    expect(second.reset).toEqual({ servers: [], addresses: [] })
  })

  it("gives a removed key's slot back to it if it returns, and to a new key only after the grace period, reset", () => {
    const { allocator, resets } = setup(2)
    assigned(allocator.assign(["a", "b"], [], 0))
    assigned(allocator.assign(["a"], [], 10_000)) // b leaves at 10 s
    // c cannot have b's slot before 70 s.
    const early = allocator.assign(["a", "c"], [], 69_999)
    expect(Either.isLeft(early)).toBe(true)
    // b comes back: same slot, nothing reset.
    expect(assigned(allocator.assign(["a", "b"], [], 50_000)).servers.get("b")).toBe(1)
    assigned(allocator.assign(["a"], [], 60_000)) // b leaves again at 60 s: the grace starts over
    expect(Either.isLeft(allocator.assign(["a", "c"], [], 119_999))).toBe(true)
    const later = assigned(allocator.assign(["a", "c"], [], 120_000))
    expect(later.servers.get("c")).toBe(1)
    expect(later.reset.servers).toEqual([1])
    expect(resets.servers).toEqual([1])
    // b is a new key now.
    expect(Either.isLeft(allocator.assign(["a", "b", "c"], [], 200_000))).toBe(true)
  })

  it("reuses the slot whose key left first, before never-used slots, and resets it", () => {
    const { allocator, resets } = setup(4, 4)
    assigned(allocator.assign(["s"], ["s|a:1", "s|b:1", "s|c:1"], 0))
    assigned(allocator.assign(["s"], ["s|c:1"], 1000)) // a and b leave
    assigned(allocator.assign(["s"], [], 20_000)) // c leaves
    // At 70 s the slots of a and b are free again, c's is not: the third new key gets the never-used slot.
    const next = assigned(allocator.assign(["s"], ["s|d:1", "s|e:1", "s|f:1"], 70_000))
    expect([...next.addresses.values()]).toEqual([0, 1, 3])
    expect(resets.addresses).toEqual([0, 1])
    expect(next.reset.addresses).toEqual([0, 1])
  })

  it("an assignment that does not fit changes nothing and says why", () => {
    const { allocator, resets } = setup(2, 2)
    assigned(allocator.assign(["a", "b"], ["a|x:1"], 0))
    const tooMany = allocator.assign(["a", "b", "c"], ["a|x:1"], 1)
    expect(Either.isLeft(tooMany) && tooMany.left).toMatchObject({
      _tag: "SlotCapacityExceeded",
      kind: "server",
      capacity: 2,
      wanted: 3,
      reason: "3 servers configured (1 new), but only 0 of the 2 server slots are free"
    })
    assigned(allocator.assign(["a"], ["a|x:1"], 2)) // b leaves
    const inGrace = allocator.assign(["a"], ["a|x:1", "a|y:1", "a|z:1"], 3)
    expect(Either.isLeft(inGrace) && inGrace.left.reason).toBe("3 addresses configured (2 new), but only 1 of the 2 address slots are free")
    const serverInGrace = allocator.assign(["a", "c"], [], 3)
    expect(Either.isLeft(serverInGrace) && serverInGrace.left.reason).toBe(
      "2 servers configured (1 new), but only 0 of the 2 server slots are free; " +
        "1 more become free 60 s after their server left the configuration"
    )
    // Nothing was taken by the refused assignments: the address slot for a|y is still free, and b still has its slot.
    const after = assigned(allocator.assign(["a", "b"], ["a|x:1", "a|y:1"], 4))
    expect([...after.servers]).toEqual([["a", 0], ["b", 1]])
    expect(after.addresses.get("a|y:1")).toBe(1)
    expect(resets).toEqual({ servers: [], addresses: [] })
  })
})
