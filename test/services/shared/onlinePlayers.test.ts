/** The players-online table on one thread: claims, refusals, releases, a dead worker's claims, a full table. */
import { describe, expect, it } from "vitest"
import { uuidWords } from "../../../src/services/shared/onlinePlayers.js"
import { attachSharedState, createSharedState } from "../../../src/services/shared/SharedState.js"

const uuidOf = (n: number) => `${n.toString(16).padStart(8, "0")}-0000-4000-8000-000000000000`

describe("players online", () => {
  it("a UUID is let in once until its claim is given back, however it is written; releases are idempotent", () => {
    const { online } = createSharedState({ workers: 1 })
    const first = online.claim("069a79f4-44e9-4726-a5be-fca90e38aaf5")
    expect(first._tag).toBe("Claimed")
    expect(online.claim("069a79f444e94726a5befca90e38aaf5")._tag).toBe("Taken")
    expect(online.claim("069A79F4-44E9-4726-A5BE-FCA90E38AAF5")._tag).toBe("Taken")
    expect(online.claim("069a79f4-44e9-4726-a5be-fca90e38aaf6")._tag).toBe("Claimed")
    expect(online.count()).toBe(2)
    if (first._tag !== "Claimed") return
    first.release()
    first.release()
    expect(online.count()).toBe(1)
    expect(online.claim("069a79f4-44e9-4726-a5be-fca90e38aaf5")._tag).toBe("Claimed")
    // Not a UUID: let through, uncounted.
    expect(online.claim("Steve")._tag).toBe("Full")
    expect(uuidWords("0000000100000002000000030000000f")).toEqual([1, 2, 3, 15])
    expect(uuidWords("ffffffff-ffff-ffff-ffff-ffffffffffff")).toEqual([-1, -1, -1, -1])
  })

  it("matches a model through many claims and releases in a small table (long probe chains, shifts on removal)", () => {
    const { online } = createSharedState({ workers: 1, onlineSlots: 64 })
    const held = new Map<number, () => void>()
    let seed = 12345
    const random = () => ((seed = (Math.imul(seed, 1103515245) + 12345) | 0) >>> 8) % 80
    for (let step = 0; step < 20_000; step++) {
      const n = random()
      const release = held.get(n)
      if (release !== undefined && step % 3 !== 0) {
        release()
        held.delete(n)
        continue
      }
      const claim = online.claim(uuidOf(n))
      if (held.has(n)) expect(claim._tag, `step ${step}: ${n} is held`).toBe("Taken")
      else if (held.size >= 48) expect(claim._tag, `step ${step}: the table is at three quarters`).toBe("Full")
      else {
        expect(claim._tag, `step ${step}: ${n} is free`).toBe("Claimed")
        if (claim._tag === "Claimed") held.set(n, claim.release)
      }
      expect(online.count()).toBe(held.size)
    }
    for (const release of held.values()) release()
    expect(online.count()).toBe(0)
  })

  it("releaseWorker gives back a dead worker's claims only; its late releases change nothing", () => {
    const control = createSharedState({ workers: 2 })
    const dead = attachSharedState(control.buffers, 0)
    const alive = attachSharedState(control.buffers, 1)
    const gone = [1, 2, 3].map((n) => dead.online.claim(uuidOf(n)))
    const kept = alive.online.claim(uuidOf(4))
    expect(control.online.count()).toBe(4)
    expect(control.online.releaseWorker(0)).toBe(3)
    expect(control.online.releaseWorker(0)).toBe(0)
    expect(control.online.count()).toBe(1)
    // The dead worker's players may come back (through another worker); a late release of the old claim is no-op.
    const back = alive.online.claim(uuidOf(1))
    expect(back._tag).toBe("Claimed")
    for (const claim of gone) if (claim._tag === "Claimed") claim.release()
    expect(alive.online.claim(uuidOf(1))._tag).toBe("Taken")
    expect(control.online.count()).toBe(2)
    if (kept._tag === "Claimed") kept.release()
    if (back._tag === "Claimed") back.release()
    expect(control.online.count()).toBe(0)
  })
})
