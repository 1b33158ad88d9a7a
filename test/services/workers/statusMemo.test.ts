/**
 * A worker's status memo: an answer is reused for as long as the main thread said, under the same configuration,
 * for the same server, state and protocol version; concurrent pings share one call; every ping is counted as the
 * main thread would have counted it.
 */
import { Deferred, Effect, Fiber } from "effect"
import { describe, expect, it } from "vitest"
import type { StatusAnswer, StatusRequest, StatusSource } from "../../../src/services/StatusService.js"
import { makeStatusMemo, STATUS_MEMO_MAX_ENTRIES } from "../../../src/services/workers/statusMemo.js"
import type { ServerDefinition } from "../../../src/schema/decode.js"

const server = (id: string) => ({ id, config: { domains: ["mc.example.com", "other.example.com", "*.w.example.com"] } }) as unknown as ServerDefinition

const request = (over: { server?: string | undefined; state?: StatusRequest["state"]; protocolVersion?: number } = {}): StatusRequest => ({
  server: over.server === undefined ? server("lobby") : server(over.server),
  state: over.state ?? "online",
  handshake: { protocolVersion: over.protocolVersion ?? 767, address: "mc.example.com", port: 25565, nextState: 1 },
  clientIp: "127.0.0.1",
  preamble: undefined
})

const answerOf = (text: string, source: StatusSource, reuseForMs: number): StatusAnswer => ({
  json: { description: { text } } as unknown as StatusAnswer["json"],
  text,
  source,
  state: "online",
  reuseForMs
})

/** A memo over a fake main thread that answers `next()` and records each call. */
const harness = (next: (asked: StatusRequest) => StatusAnswer) => {
  let now = 1_000
  let snapshot: object = {}
  const asked: Array<StatusRequest> = []
  const counted: Array<string> = []
  const memo = makeStatusMemo({
    ask: (req) =>
      Effect.sync(() => {
        asked.push(req)
        return next(req)
      }),
    snapshot: () => snapshot,
    nowMs: () => now,
    count: (outcome) => counted.push(outcome)
  })
  return {
    memo,
    asked,
    counted,
    advance: (ms: number) => {
      now += ms
    },
    newSnapshot: () => {
      snapshot = {}
    },
    ping: (req = request()) => Effect.runPromise(memo.answer(req))
  }
}

describe("statusMemo", () => {
  it("reuses an answer for as long as the main thread said, as a cache hit, then asks again", async () => {
    let calls = 0
    const h = harness(() => answerOf(`answer ${++calls}`, calls === 1 ? "backend" : "cache", 3_000))
    expect((await h.ping()).text).toBe("answer 1")
    h.advance(2_999)
    const reused = await h.ping()
    expect(reused.text).toBe("answer 1")
    expect(reused.source).toBe("cache")
    expect(h.asked).toHaveLength(1)
    // The first ping was counted by the main thread; the reuse counts as the cache hit it stands for.
    expect(h.counted).toEqual(["hit"])
    h.advance(1)
    expect((await h.ping()).text).toBe("answer 2")
    expect(h.asked).toHaveLength(2)
  })

  it("does not reuse an answer that says 0 (a fallback after a failed fetch)", async () => {
    let calls = 0
    const h = harness(() => answerOf(`answer ${++calls}`, "stale", 0))
    await h.ping()
    await h.ping()
    expect(h.asked).toHaveLength(2)
    expect(h.counted).toEqual([])
  })

  it("forgets every answer when the configuration changes", async () => {
    let calls = 0
    const h = harness(() => answerOf(`answer ${++calls}`, "cache", 5_000))
    await h.ping()
    h.newSnapshot()
    expect((await h.ping()).text).toBe("answer 2")
    expect(h.asked).toHaveLength(2)
  })

  it("keeps servers, domains, states and protocol versions apart; a wildcard's names share one answer", async () => {
    const h = harness((req) => answerOf(`${req.server?.id ?? "none"} ${req.state} ${req.handshake.protocolVersion}`, "cache", 5_000))
    const at = (address: string): StatusRequest => ({ ...request(), handshake: { ...request().handshake, address } })
    const asks = [
      request(),
      request({ server: "survival" }),
      request({ state: "sleeping" }),
      request({ protocolVersion: 47 }),
      { ...request(), server: undefined },
      at("other.example.com"),
      at("a.w.example.com")
    ]
    for (const req of asks) await h.ping(req)
    for (const req of asks) await h.ping(req)
    // The same configured domain however it is written; another name under the wildcard.
    await h.ping(at("MC.example.com.\0FML2\0"))
    await h.ping(at("b.w.example.com"))
    expect(h.asked).toHaveLength(7)
    expect((await h.ping(request({ state: "sleeping" }))).text).toBe("lobby sleeping 767")
    expect((await h.ping({ ...request(), server: undefined })).text).toBe("none online 767")
  })

  it("reuses a composed answer without counting it in the cache statistics", async () => {
    const h = harness(() => answerOf("sleeping", "composed", 1_000))
    await h.ping()
    const reused = await h.ping()
    expect(reused.source).toBe("composed")
    expect(h.asked).toHaveLength(1)
    expect(h.counted).toEqual([])
  })

  it("lets concurrent pings share one call, each counted as the main thread would count it", async () => {
    const gate = Effect.runSync(Deferred.make<void>())
    const asked: Array<StatusRequest> = []
    const counted: Array<string> = []
    const memo = makeStatusMemo({
      ask: (req) => Effect.as(Effect.zipRight(Effect.sync(() => asked.push(req)), Deferred.await(gate)), answerOf("fetched", "backend", 5_000)),
      snapshot: () => "one",
      nowMs: () => 0,
      count: (outcome) => counted.push(outcome)
    })
    const first = Effect.runFork(memo.answer(request()))
    const others = Array.from({ length: 3 }, () => Effect.runFork(memo.answer(request())))
    await Effect.runPromise(Effect.yieldNow())
    // The first ping leaves before the answer: the others still get it.
    await Effect.runPromise(Fiber.interrupt(first))
    await Effect.runPromise(Deferred.succeed(gate, undefined))
    const answers = await Promise.all(others.map((fiber) => Effect.runPromise(Fiber.join(fiber))))
    expect(answers.map((answer) => answer.text)).toEqual(["fetched", "fetched", "fetched"])
    expect(asked).toHaveLength(1)
    // Three pings waited on a fetch: three misses, as the main thread counts pings that wait on its fetch.
    expect(counted).toEqual(["miss", "miss", "miss"])
    await Effect.runPromise(memo.answer(request()))
    expect(asked).toHaveLength(1)
    expect(counted).toEqual(["miss", "miss", "miss", "hit"])
  })

  it("remembers at most a bounded number of answers", async () => {
    const h = harness((req) => answerOf(String(req.handshake.protocolVersion), "cache", 60_000))
    for (let version = 0; version < STATUS_MEMO_MAX_ENTRIES + 10; version++) await h.ping(request({ protocolVersion: version }))
    expect(h.memo.size()).toBe(STATUS_MEMO_MAX_ENTRIES)
    // The oldest went first.
    await h.ping(request({ protocolVersion: 0 }))
    expect(h.asked).toHaveLength(STATUS_MEMO_MAX_ENTRIES + 11)
    await h.ping(request({ protocolVersion: STATUS_MEMO_MAX_ENTRIES + 9 }))
    expect(h.asked).toHaveLength(STATUS_MEMO_MAX_ENTRIES + 11)
  })
})
