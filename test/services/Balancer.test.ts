/** Balancer arithmetic with TestClock: strategies, weights, ejection back-off, health and slow start. */
import { it } from "@effect/vitest"
import { Clock, Duration, Effect, Either, Layer, Scope, TestClock } from "effect"
import { describe, expect } from "vitest"
import { decodeServerText, type ServerDefinition } from "../../src/schema/decode.js"
import { SharedMemory } from "../../src/services/SharedMemory.js"
import { formatHostPort } from "../../src/schema/HostPort.js"
import { Balancer } from "../../src/services/Balancer.js"
import { ejectionMillis, freshState, slowStartFactor } from "../../src/services/balancer/strategy.js"
import { monotonicMillis } from "../../src/services/monotonicClock.js"
import type { BackendAddress } from "../../src/schema/ServerConfig.js"

// The data plane takes the monotonic time as an argument; these read it from the (test) clock as the connection path does.
type Definition = ServerDefinition
const order = (balancer: Balancer, s: Definition) => Effect.map(monotonicMillis, (now) => balancer.dataPlane.order(s, now))
const reportFailure = (balancer: Balancer, s: Definition, address: BackendAddress) =>
  Effect.map(monotonicMillis, (now) => balancer.dataPlane.failed(s, address, now))
const reportSuccess = (balancer: Balancer, s: Definition, address: BackendAddress) =>
  Effect.map(monotonicMillis, (now) => balancer.dataPlane.succeeded(s, address, now))
/** Counts a live session on an address for the life of the scope. */
const track = (balancer: Balancer, s: Definition, address: BackendAddress) =>
  Effect.acquireRelease(Effect.sync(() => balancer.dataPlane.acquire(s, address)), (release) => Effect.sync(release))

const decoded = (body: string) => Either.getOrThrow(decodeServerText("s.toml", "s.toml", body))
const firsts = (balancer: Balancer, definition: Definition, count: number) =>
  Effect.forEach(Array.from({ length: count }), () =>
    Effect.map(order(balancer, definition), (addresses) => formatHostPort(addresses[0]!))
  )

// Every case runs twice: with the state of this thread's own (a server without slots) and with the state shared by
// every thread (a server with slots, over a fresh SharedMemory).
describe.each([
  { kind: "this thread's state", shared: false },
  { kind: "shared state", shared: true }
])("Balancer ($kind)", ({ shared }) => {
  const layer = shared ? Balancer.Default.pipe(Layer.provide(SharedMemory.layer(1))) : Balancer.Default
  const server = (body: string) => {
    const definition = decoded(body)
    return shared ? { ...definition, slots: { server: 3, addresses: definition.config.addresses.map((_, i) => 10 + i) } } : definition
  }

  it.effect("first_available keeps the configured order", () =>
    Effect.gen(function* () {
      const balancer = yield* Balancer
      const s = server(`addresses = ["a:1", "b:1", "c:1"]`)
      const addresses = yield* order(balancer, s)
      expect(addresses.map(formatHostPort)).toEqual(["a:1", "b:1", "c:1"])
      expect(yield* firsts(balancer, s, 3)).toEqual(["a:1", "a:1", "a:1"])
    }).pipe(Effect.provide(layer))
  )

  it.effect("round_robin is smooth and weighted (nginx order for weights 5, 1, 1)", () =>
    Effect.gen(function* () {
      const balancer = yield* Balancer
      const s = server(`balance = "round_robin"\naddresses = [{ address = "a:1", weight = 5 }, "b:1", "c:1"]`)
      expect(yield* firsts(balancer, s, 7)).toEqual(["a:1", "a:1", "b:1", "a:1", "c:1", "a:1", "a:1"])
    }).pipe(Effect.provide(layer))
  )

  it.scoped("least_conn picks the fewest live sessions per unit of weight", () =>
    Effect.gen(function* () {
      const balancer = yield* Balancer
      const s = server(`balance = "least_conn"\naddresses = [{ address = "a:1", weight = 2 }, "b:1"]`)
      const a = s.config.addresses[0]!
      const b = s.config.addresses[1]!
      // a: 2 sessions / weight 2 = 1.0; b: 0 -> b
      yield* track(balancer, s, a)
      yield* track(balancer, s, a)
      expect(formatHostPort((yield* order(balancer, s))[0]!)).toBe("b:1")
      // b: 1 / 1 = 1.0 ties with a; a was picked less recently
      yield* track(balancer, s, b)
      yield* track(balancer, s, b)
      expect(formatHostPort((yield* order(balancer, s))[0]!)).toBe("a:1")
      // Sessions that end are no longer counted.
      const scope = yield* Scope.make()
      yield* track(balancer, s, a).pipe(Scope.extend(scope))
      yield* Scope.close(scope, { _tag: "Success", value: undefined } as never)
      const status = yield* balancer.status(s)
      expect(status.map((x) => x.active)).toEqual([2, 2])
    }).pipe(Effect.provide(layer))
  )

  it.effect("a failed address is ejected with a growing back-off, tried last, and trusted again after success", () =>
    Effect.gen(function* () {
      const balancer = yield* Balancer
      const s = server(`addresses = ["a:1", "b:1"]`)
      const a = s.config.addresses[0]!
      yield* reportFailure(balancer, s, a)
      expect((yield* order(balancer, s)).map(formatHostPort)).toEqual(["b:1", "a:1"])
      yield* TestClock.adjust(Duration.millis(999))
      expect(formatHostPort((yield* order(balancer, s))[0]!)).toBe("b:1")
      yield* TestClock.adjust(Duration.millis(1))
      expect(formatHostPort((yield* order(balancer, s))[0]!)).toBe("a:1")
      // A second failure doubles the ejection.
      yield* reportFailure(balancer, s, a)
      yield* TestClock.adjust(Duration.millis(1999))
      expect(formatHostPort((yield* order(balancer, s))[0]!)).toBe("b:1")
      yield* TestClock.adjust(Duration.millis(1))
      yield* reportSuccess(balancer, s, a)
      expect((yield* balancer.status(s))[0]).toMatchObject({ failures: 0, ejectedUntil: undefined })
      expect([1, 2, 3, 7, 20].map(ejectionMillis)).toEqual([1000, 2000, 4000, 60_000, 60_000])
    }).pipe(Effect.provide(layer))
  )

  it.effect("ejections run on a monotonic clock: a wall clock stepped back an hour does not prolong them", () => {
    let wall = 3_600_000
    let monotonic = 0
    const stepped: Clock.Clock = {
      [Clock.ClockTypeId]: Clock.ClockTypeId,
      unsafeCurrentTimeMillis: () => wall,
      currentTimeMillis: Effect.sync(() => wall),
      unsafeCurrentTimeNanos: () => BigInt(monotonic) * 1_000_000n,
      currentTimeNanos: Effect.sync(() => BigInt(monotonic) * 1_000_000n),
      sleep: () => Effect.void
    }
    return Effect.gen(function* () {
      const balancer = yield* Balancer
      const s = server(`addresses = ["a:1", "b:1"]`)
      yield* reportFailure(balancer, s, s.config.addresses[0]!)
      expect(formatHostPort((yield* order(balancer, s))[0]!)).toBe("b:1")
      // A second later by the monotonic clock, an hour earlier by the wall clock: the 1 s ejection is over.
      wall -= 3_600_000
      monotonic += 1000
      expect(formatHostPort((yield* order(balancer, s))[0]!)).toBe("a:1")
    }).pipe(Effect.withClock(stepped), Effect.provide(layer))
  })

  it.effect("weight 0 drains an address: used only when nothing else is left; unhealthy addresses go last", () =>
    Effect.gen(function* () {
      const balancer = yield* Balancer
      const s = server(`balance = "round_robin"\naddresses = [{ address = "a:1", weight = 0 }, "b:1", "c:1"]`)
      const [a, b, c] = s.config.addresses
      yield* balancer.setHealth(s, b!, false)
      expect((yield* order(balancer, s)).map(formatHostPort)).toEqual(["c:1", "a:1", "b:1"])
      yield* reportFailure(balancer, s, c!)
      expect((yield* order(balancer, s)).map(formatHostPort)).toEqual(["a:1", "c:1", "b:1"])
      expect(balancer.dataPlane.anyHealthy(s)).toBe(true)
      yield* balancer.setHealth(s, a!, false)
      expect(balancer.dataPlane.anyHealthy(s)).toBe(true)
      yield* balancer.setHealth(s, c!, false)
      expect(balancer.dataPlane.anyHealthy(s)).toBe(false)
    }).pipe(Effect.provide(layer))
  )

  it.effect("slow start ramps a recovered address over its window (TestClock)", () =>
    Effect.gen(function* () {
      const balancer = yield* Balancer
      const s = server(`balance = "round_robin"\nslow_start = "100s"\naddresses = ["a:1", "b:1"]`)
      const a = s.config.addresses[0]!
      yield* balancer.setHealth(s, a, false)
      yield* balancer.setHealth(s, a, true) // recovered now: starts at 10% of its weight
      const share = (picks: Array<string>) => picks.filter((p) => p === "a:1").length / picks.length
      const early = share(yield* firsts(balancer, s, 100))
      yield* TestClock.adjust(Duration.seconds(50))
      const middle = share(yield* firsts(balancer, s, 100))
      yield* TestClock.adjust(Duration.seconds(50))
      const late = share(yield* firsts(balancer, s, 100))
      expect(early).toBeCloseTo(0.1 / 1.1, 1)
      expect(middle).toBeCloseTo(0.5 / 1.5, 1)
      expect(late).toBeCloseTo(0.5, 1)
    }).pipe(Effect.provide(layer))
  )
})

describe("slow start curve", () => {
  const state = { ...freshState(), recoveredAt: 0 }
  it("is linear with aggression 1 and gentler at the start with higher values, never below 10%", () => {
    expect(slowStartFactor(state, 50_000, { windowMs: 100_000, aggression: 1 })).toBeCloseTo(0.5)
    expect(slowStartFactor(state, 50_000, { windowMs: 100_000, aggression: 2 })).toBeCloseTo(0.25)
    expect(slowStartFactor(state, 1_000, { windowMs: 100_000, aggression: 1 })).toBe(0.1)
    expect(slowStartFactor(state, 100_000, { windowMs: 100_000, aggression: 3 })).toBe(1)
    expect(slowStartFactor(freshState(), 0, { windowMs: 100_000, aggression: 1 })).toBe(1)
  })
})
