/**
 * The player registry: live sessions with byte counts read on demand, per-server counts, and leases that give a
 * session back once.
 */
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { PlayerRegistry } from "../../src/services/PlayerRegistry.js"

const entry = (id: number, serverId: string) => ({
  id,
  serverId,
  clientAddress: "127.0.0.1",
  clientPort: 50_000 + id,
  protocolVersion: 767,
  name: `player${id}`,
  uuid: undefined
})

const run = <A>(body: (registry: PlayerRegistry) => A): A =>
  Effect.runSync(Effect.map(PlayerRegistry, body).pipe(Effect.provide(PlayerRegistry.Default)))

describe("PlayerRegistry", () => {
  it("lists sessions with their backend and byte counts, and counts them per server", () => {
    run((registry) => {
      const a = registry.addAt(entry(1, "lobby"), 1_000)
      registry.addAt(entry(2, "lobby"), 2_000)
      registry.addAt(entry(3, "survival"), 3_000)
      let bytesIn = 10
      a.attachBackend("127.0.0.1:25566", { bytesIn: () => bytesIn, bytesOut: () => 20 })
      bytesIn = 15
      const listed = Effect.runSync(registry.list)
      expect(listed.find((session) => session.id === 1)).toMatchObject({
        backendAddress: "127.0.0.1:25566",
        bytesIn: 15,
        bytesOut: 20,
        since: 1_000
      })
      expect(listed.find((session) => session.id === 2)).toMatchObject({ backendAddress: undefined, bytesIn: 0 })
      expect(registry.countForNow("lobby")).toBe(2)
      expect(registry.countForNow("survival")).toBe(1)
      expect(Effect.runSync(registry.total)).toBe(3)
    })
  })

  it("a released lease leaves at once and only once", () => {
    run((registry) => {
      const lease = registry.addAt(entry(1, "lobby"), 0)
      registry.addAt(entry(2, "lobby"), 0)
      lease.release()
      lease.release()
      expect(registry.countForNow("lobby")).toBe(1)
      const listed = Effect.runSync(registry.list)
      expect(listed.map((session) => session.id)).toEqual([2])
    })
  })
})
