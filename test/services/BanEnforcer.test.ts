/**
 * BanEnforcer with a real BanStore (a ban file in a temporary directory) and the real PlayerRegistry, on TestClock:
 * a ban removes the online players it matches, and a session the registry lists only after the ban came in (a
 * worker's session reported in its next batch) is removed by the second look.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer, Logger, Schema } from "effect"
import * as path from "node:path"
import { GlobalConfig } from "../../src/schema/GlobalConfig.js"
import { BanEnforcer } from "../../src/services/BanEnforcer.js"
import { BanStore } from "../../src/services/BanStore.js"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { PlayerRegistry, type SessionEntry } from "../../src/services/PlayerRegistry.js"
import { makeConfigDir } from "../helpers/tempdir.js"

const DEFAULT_GLOBAL = Schema.decodeUnknownSync(GlobalConfig)({})

const layer = () => {
  const file = path.join(makeConfigDir().root, "bans.json")
  const config = ConfigStore.layerStatic({
    configFile: path.join(path.dirname(file), "proxy.toml"),
    global: { ...DEFAULT_GLOBAL, ban: { file, purge_interval: Duration.minutes(5), enable_audit_log: false } },
    servers: new Map(),
    revision: 1
  })
  const store = BanStore.Default.pipe(Layer.provide(config), Layer.provide(NodeFileSystem.layer))
  return BanEnforcer.Default.pipe(Layer.provideMerge(store), Layer.provideMerge(PlayerRegistry.Default))
}

const entry = (id: number, name: string, clientAddress = "198.51.100.7"): SessionEntry => ({
  id,
  serverId: "lobby",
  clientAddress,
  clientPort: 40000 + id,
  protocolVersion: 769,
  name,
  uuid: undefined,
  since: 0
})

/** The log lines written while the returned layer is provided. */
const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ message }) => {
    lines.push(Array.isArray(message) ? message.map(String).join(" ") : String(message))
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

/** Lets the enforcer's fiber run what is due now. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

describe("BanEnforcer", () => {
  it.scoped("removes the players a new ban matches, each once, and a later ban the players it matches then", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      const registry = yield* PlayerRegistry
      const bans = yield* BanStore
      yield* BanEnforcer
      const ended = new Map<number, Array<string>>()
      const online = (session: SessionEntry) => {
        ended.set(session.id, [])
        registry.track(session).attachEnder({ end: (reason) => ended.get(session.id)?.push(reason) })
      }
      online(entry(1, "Steve"))
      online(entry(2, "Alex", "198.51.100.8"))

      yield* bans.add({ target: { type: "username", value: "Steve" }, reason: "griefing", source: "test" })
      yield* settle
      expect(ended.get(1)).toHaveLength(1)
      expect(ended.get(1)?.[0]).toContain("griefing")
      expect(ended.get(2)).toEqual([])

      // Steve again on another connection (listed after the ban), then another ban: the new session goes too.
      online(entry(3, "Steve"))
      yield* bans.add({ target: { type: "username", value: "Herobrine" }, reason: "myth", source: "test" })
      yield* settle
      expect(ended.get(3)).toHaveLength(1)
      // Session 1 is still listed (its connection has not closed here): not ended, nor logged, a second time.
      expect(ended.get(1)).toHaveLength(1)
      expect(ended.get(2)).toEqual([])
      expect(logs.lines.filter((line) => line.startsWith("removed Steve"))).toHaveLength(2)
    }).pipe(Effect.provide(layer().pipe(Layer.provide(logs.layer))))
  })

  it.scoped("a burst of bans is enforced at once, each change without waiting on the second looks of those before it", () =>
    Effect.gen(function* () {
      const registry = yield* PlayerRegistry
      const bans = yield* BanStore
      yield* BanEnforcer
      const reasons: Array<string> = []
      registry.track(entry(1, "Player5")).attachEnder({ end: (reason) => reasons.push(reason) })
      for (let i = 1; i <= 5; i++) yield* bans.add({ target: { type: "username", value: `Player${i}` }, reason: `ban ${i}`, source: "test" })
      yield* settle
      expect(reasons).toHaveLength(1)
      expect(reasons[0]).toContain("ban 5")
    }).pipe(Effect.provide(layer()))
  )

  it.scoped("enforce, asked directly, ends what the bans in force match and says how many", () =>
    Effect.gen(function* () {
      const registry = yield* PlayerRegistry
      const bans = yield* BanStore
      const enforcer = yield* BanEnforcer
      const reasons: Array<string> = []
      registry.track(entry(1, "Notch", "203.0.113.9")).attachEnder({ end: (reason) => reasons.push(reason) })
      registry.track(entry(2, "Alex")).attachEnder({ end: (reason) => reasons.push(reason) })
      expect(yield* enforcer.enforce).toBe(0)
      yield* bans.add({ target: { type: "ip", value: "203.0.113.9" }, reason: "spam", source: "test" })
      yield* settle
      expect(reasons).toHaveLength(1)
      // The session is still listed until its connection closes: asked again, enforce ends it again.
      expect(yield* enforcer.enforce).toBe(1)
    }).pipe(Effect.provide(layer()))
  )
})
