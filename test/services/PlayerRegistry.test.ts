/**
 * The player registry: live sessions with byte counts read on demand, per-server counts, and leases that give a
 * session back once.
 */
import { Effect, Either, Layer, Stream } from "effect"
import { decodeServerText, type ServerDefinition } from "../../src/schema/decode.js"
import { SharedMemory } from "../../src/services/SharedMemory.js"
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

const definition = (id: string, maxPlayers = 0, slot?: number): ServerDefinition => {
  const decoded = Either.getOrThrow(decodeServerText(`${id}.toml`, `${id}.toml`, `addresses = ["a:1"]\nmax_players = ${maxPlayers}`))
  return slot === undefined ? decoded : { ...decoded, slots: { server: slot, addresses: [slot] } }
}
const lobby = definition("lobby")
const survival = definition("survival")
const serverOf = (id: string) => (id === "lobby" ? lobby : survival)
/** Admits a session that must get in. */
const add = (registry: PlayerRegistry, e: ReturnType<typeof entry>, since: number) => {
  const lease = registry.dataPlane.admit(serverOf(e.serverId), e, since)
  if (lease === undefined) throw new Error(`${e.id} was refused`)
  return lease
}

describe("PlayerRegistry", () => {
  it("lists sessions with their backend and byte counts, and counts them per server", () => {
    run((registry) => {
      const a = add(registry, entry(1, "lobby"), 1_000)
      add(registry, entry(2, "lobby"), 2_000)
      add(registry, entry(3, "survival"), 3_000)
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
      expect(registry.dataPlane.countFor(lobby)).toBe(2)
      expect(registry.dataPlane.countFor(survival)).toBe(1)
      expect(Effect.runSync(registry.total)).toBe(3)
    })
  })

  it("a released lease leaves at once and only once", () => {
    run((registry) => {
      const lease = add(registry, entry(1, "lobby"), 0)
      add(registry, entry(2, "lobby"), 0)
      lease.release()
      lease.release()
      expect(registry.dataPlane.countFor(lobby)).toBe(1)
      const listed = Effect.runSync(registry.list)
      expect(listed.map((session) => session.id)).toEqual([2])
    })
  })

  it("ends a session from outside through its ender, once, and an ender attached later at once", () => {
    run((registry) => {
      const ended: Array<string> = []
      const a = add(registry, entry(1, "lobby"), 0)
      a.attachEnder({ end: (reason) => ended.push(`a:${reason}`) })
      const b = add(registry, entry(2, "lobby"), 0)
      expect(Effect.runSync(registry.end(1, "kicked"))).toBe(true)
      expect(Effect.runSync(registry.end(1, "again"))).toBe(true)
      expect(ended).toEqual(["a:kicked"])
      // b has no ender yet (still being set up): the one it gets later ends it at once, with the reason.
      expect(Effect.runSync(registry.endWhere((session) => session.name === "player2", "banned"))).toBe(1)
      b.attachEnder({ end: (reason) => ended.push(`b:${reason}`) })
      expect(ended).toEqual(["a:kicked", "b:banned"])
      // A session ended from outside stays counted until its connection closes and the lease is released.
      expect(registry.dataPlane.countFor(lobby)).toBe(2)
      a.release()
      expect(Effect.runSync(registry.end(1, "gone"))).toBe(false)
      expect(registry.dataPlane.countFor(lobby)).toBe(1)
    })
  })

  it.each([
    { kind: "counted here", slot: undefined },
    { kind: "in the shared counters", slot: 7 }
  ])("max_players takes places exactly and gives them back once ($kind)", ({ slot }) => {
    const full = definition("full", 2, slot)
    Effect.runSync(
      Effect.map(PlayerRegistry, (registry) => {
        const a = registry.dataPlane.admit(full, entry(1, "full"), 0)
        const b = registry.dataPlane.admit(full, entry(2, "full"), 0)
        expect(registry.dataPlane.admit(full, entry(3, "full"), 0)).toBeUndefined()
        expect(registry.dataPlane.countFor(full)).toBe(2)
        a!.release()
        a!.release()
        expect(registry.dataPlane.countFor(full)).toBe(1)
        expect(registry.dataPlane.admit(full, entry(4, "full"), 0)).toBeDefined()
        expect(registry.dataPlane.admit(full, entry(5, "full"), 0)).toBeUndefined()
        b!.release()
      }).pipe(Effect.provide(PlayerRegistry.Default.pipe(Layer.provide(SharedMemory.layer(1)))))
    )
  })

  it("tells subscribers of each join (the relay started) and leave, not of sessions that never joined", async () => {
    const events = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const registry = yield* PlayerRegistry
          const received: Array<string> = []
          const stream = yield* registry.subscribe
          yield* Effect.forkScoped(Stream.runForEach(stream, (event) => Effect.sync(() => received.push(`${event._tag} ${event.session.name}`))))
          const refused = add(registry, entry(1, "lobby"), 1_000)
          refused.release()
          const joined = add(registry, entry(2, "lobby"), 2_000)
          joined.attachBackend("127.0.0.1:25566", { bytesIn: () => 7, bytesOut: () => 9 })
          joined.attachBackend("127.0.0.1:25566", { bytesIn: () => 7, bytesOut: () => 9 })
          joined.release()
          joined.release()
          yield* Effect.sleep("20 millis")
          return received
        }).pipe(Effect.provide(PlayerRegistry.Default))
      )
    )
    expect(events).toEqual(["Joined player2", "Left player2"])
  })
})
