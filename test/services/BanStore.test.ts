/**
 * BanStore with real files in temporary directories. Expiry and purging run on TestClock; hand edits and the
 * crash test use real time and real processes.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { NodeFileSystem } from "@effect/platform-node"
import { afterEach, describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Either, Layer, Logger, Option, Queue, Schema, Stream, TestClock } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { GlobalConfig } from "../../src/schema/GlobalConfig.js"
import { type AuditEntry, type Ban, type BanChange, banMessage, BanStore, type BanTarget } from "../../src/services/BanStore.js"
import { decodeBanFile } from "../../src/services/bans/file.js"
import { type ConfigSnapshot, ConfigStore } from "../../src/services/ConfigStore.js"
import { makeConfigDir } from "../helpers/tempdir.js"

const DEFAULT_GLOBAL = Schema.decodeUnknownSync(GlobalConfig)({})
/** TestClock starts here: 2025-01-01T00:00:00Z. */
const T0 = Date.UTC(2025, 0, 1)
const T0_SECONDS = T0 / 1000

interface StoreOptions {
  readonly purgeInterval?: Duration.Duration
  readonly audit?: boolean
}

const snapshotFor = (file: string, options: StoreOptions): ConfigSnapshot => ({
  configFile: path.join(path.dirname(file), "proxy.toml"),
  global: {
    ...DEFAULT_GLOBAL,
    ban: { file, purge_interval: options.purgeInterval ?? Duration.minutes(5), enable_audit_log: options.audit ?? true }
  },
  servers: new Map(),
  revision: 1
})

const storeLayer = (file: string, options: StoreOptions = {}) =>
  BanStore.Default.pipe(Layer.provide(ConfigStore.layerStatic(snapshotFor(file, options))), Layer.provide(NodeFileSystem.layer))

/** Runs `use` with a store on `file`, closed afterwards (watch and fibers stopped). */
const withStore = <A, E>(file: string, use: (bans: BanStore) => Effect.Effect<A, E>, options: StoreOptions = {}) =>
  Effect.flatMap(BanStore, use).pipe(Effect.provide(storeLayer(file, options)))

/** Log lines (`LEVEL message`) written while the returned layer is provided. */
const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    lines.push(`${logLevel.label} ${Array.isArray(message) ? message.map(String).join(" ") : String(message)}`)
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

const banFile = () => path.join(makeConfigDir().root, "bans.json")

interface FileJson {
  readonly bans: ReadonlyArray<Ban>
  readonly audit_log: ReadonlyArray<AuditEntry>
}
const readJson = (file: string): FileJson => JSON.parse(readFileSync(file, "utf8")) as FileJson

const ip = (value: string): BanTarget => ({ type: "ip", value })
const username = (value: string): BanTarget => ({ type: "username", value })
const uuid = (value: string): BanTarget => ({ type: "uuid", value })

const player = (name: string, id?: string) => ({ name, uuid: id })

/** What the connection path sees (`dataPlane`) at the clock's time, as an Option. */
const ipBanNow = (bans: BanStore, address: string) =>
  Effect.map(Clock.currentTimeMillis, (now) => Option.fromNullable(bans.dataPlane.ipBan(address, now)))
const playerBanNow = (bans: BanStore, who: { readonly name: string; readonly uuid: string | undefined }) =>
  Effect.map(Clock.currentTimeMillis, (now) => Option.fromNullable(bans.dataPlane.playerBan(who, now)))

/** Real time passes (TestClock tests: lets file I/O and the file watch run). */
const realSleep = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/** Re-runs `probe` in real time until it is true, for up to `timeoutMs`. */
const eventually = (probe: Effect.Effect<boolean>, what: string, timeoutMs = 2_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + timeoutMs
    while (!(yield* probe)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`))
      yield* realSleep(25)
    }
  })

/**
 * Moves the clock on by purge intervals until `done`. The purge fiber sleeps on the TestClock but its file I/O takes
 * real time, so each step also waits a little in real time for the fiber to finish and sleep again.
 */
const purgeUntil = (interval: Duration.Duration, done: Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    for (let round = 0; round < 10 && !(yield* done); round++) {
      yield* TestClock.adjust(interval)
      yield* eventually(done, "the purge", 300).pipe(Effect.ignore)
    }
    expect(yield* done).toBe(true)
  })

describe("targets", () => {
  it.effect("IP bans match the address, also when the client is seen as IPv4-mapped IPv6", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          const ban = yield* bans.add({ target: ip("203.0.113.7"), reason: "spam", source: "test" })
          expect(ban).toEqual({ target: ip("203.0.113.7"), reason: "spam", created_at: T0_SECONDS, expires_at: null, source: "test" })
          expect(Option.isSome(yield* ipBanNow(bans, "203.0.113.7"))).toBe(true)
          expect(Option.isSome(yield* ipBanNow(bans, "::ffff:203.0.113.7"))).toBe(true)
          expect(Option.isNone(yield* ipBanNow(bans, "203.0.113.8"))).toBe(true)
          expect(Option.isNone(yield* ipBanNow(bans, "not an address"))).toBe(true)

          // Stored in one form whichever way it was written.
          const mapped = yield* bans.add({ target: ip("::FFFF:198.51.100.1"), reason: "", source: "test" })
          expect(mapped.target).toEqual(ip("198.51.100.1"))
          const v6 = yield* bans.add({ target: ip("2001:DB8:0:0::1"), reason: "", source: "test" })
          expect(v6.target).toEqual(ip("2001:db8::1"))
          expect(Option.isSome(yield* ipBanNow(bans, "2001:db8::1"))).toBe(true)
          expect((yield* bans.list).map((b) => b.target.value)).toEqual(["203.0.113.7", "198.51.100.1", "2001:db8::1"])
          expect(readJson(file).bans.map((b) => b.target.value)).toEqual(["203.0.113.7", "198.51.100.1", "2001:db8::1"])

          expect(yield* bans.remove(ip("::ffff:203.0.113.7"), "test")).toBe(true)
          expect(Option.isNone(yield* ipBanNow(bans, "203.0.113.7"))).toBe(true)
          expect(yield* bans.remove(ip("203.0.113.7"), "test")).toBe(false)
          expect(readJson(file).bans.map((b) => b.target.value)).toEqual(["198.51.100.1", "2001:db8::1"])
        })
      )
    })
  )

  it.effect("CIDR bans match IPv4 clients, IPv4-mapped clients and IPv6 ranges", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      yield* withStore(banFile(), (bans) =>
        Effect.gen(function* () {
          const v4 = yield* bans.add({ target: ip("203.0.113.77/24"), reason: "range", source: "test" })
          expect(v4.target).toEqual(ip("203.0.113.0/24"))
          const v6 = yield* bans.add({ target: ip("2001:db8::5/32"), reason: "range", source: "test" })
          expect(v6.target).toEqual(ip("2001:db8::/32"))
          // An IPv4 range written as IPv4-mapped IPv6 is the IPv4 range; a full-length prefix is one address.
          expect((yield* bans.add({ target: ip("::ffff:198.51.100.0/120"), reason: "", source: "test" })).target).toEqual(
            ip("198.51.100.0/24")
          )
          expect((yield* bans.add({ target: ip("192.0.2.9/32"), reason: "", source: "test" })).target).toEqual(ip("192.0.2.9"))

          const check = (address: string) => Effect.map(ipBanNow(bans, address), Option.isSome)
          expect(yield* check("203.0.113.0")).toBe(true)
          expect(yield* check("203.0.113.255")).toBe(true)
          expect(yield* check("::ffff:203.0.113.200")).toBe(true)
          expect(yield* check("203.0.114.1")).toBe(false)
          expect(yield* check("2001:db8:1234::9")).toBe(true)
          expect(yield* check("2001:DB8::1")).toBe(true)
          expect(yield* check("2001:db9::1")).toBe(false)
          expect(yield* check("198.51.100.42")).toBe(true)
          expect(yield* check("::ffff:198.51.100.42")).toBe(true)
          expect(yield* check("192.0.2.9")).toBe(true)
          expect(yield* check("192.0.2.10")).toBe(false)
          expect(Option.getOrThrow(yield* ipBanNow(bans, "203.0.113.5")).reason).toBe("range")

          expect(yield* bans.remove(ip("203.0.113.9/24"), "test")).toBe(true)
          expect(yield* check("203.0.113.5")).toBe(false)
        })
      )
    })
  )

  it.effect("usernames compare case-insensitively; adding again replaces the ban", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          yield* bans.add({ target: username("Steve"), reason: "griefing", source: "test" })
          expect(Option.isSome(yield* playerBanNow(bans, player("steve")))).toBe(true)
          expect(Option.isSome(yield* playerBanNow(bans, player("STEVE", "069a79f4-44e9-4726-a5be-fca90e38aaf5")))).toBe(true)
          expect(Option.isNone(yield* playerBanNow(bans, player("Alex")))).toBe(true)

          yield* bans.add({ target: username("sTEVE"), reason: "again", source: "test" })
          const list = yield* bans.list
          expect(list.map((b) => [b.target.value, b.reason])).toEqual([["sTEVE", "again"]])
          expect(readJson(file).bans).toHaveLength(1)

          expect(yield* bans.remove(username("STEVE"), "test")).toBe(true)
          expect(Option.isNone(yield* playerBanNow(bans, player("steve")))).toBe(true)
        })
      )
    })
  )

  it.effect("UUIDs compare case-insensitively with or without dashes and are stored dashed lower-case", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          const ban = yield* bans.add({ target: uuid("069A79F444E94726A5BEFCA90E38AAF5"), reason: "alt", source: "test" })
          expect(ban.target).toEqual(uuid("069a79f4-44e9-4726-a5be-fca90e38aaf5"))
          expect(readJson(file).bans[0]!.target).toEqual(uuid("069a79f4-44e9-4726-a5be-fca90e38aaf5"))
          expect(Option.isSome(yield* playerBanNow(bans, player("Notch", "069a79f4-44e9-4726-a5be-fca90e38aaf5")))).toBe(true)
          expect(Option.isSome(yield* playerBanNow(bans, player("Notch", "069a79f444e94726a5befca90e38aaf5")))).toBe(true)
          expect(Option.isSome(yield* playerBanNow(bans, player("Notch", "069A79F4-44E9-4726-A5BE-FCA90E38AAF5")))).toBe(true)
          expect(Option.isNone(yield* playerBanNow(bans, player("Notch", "169a79f4-44e9-4726-a5be-fca90e38aaf5")))).toBe(true)
          expect(Option.isNone(yield* playerBanNow(bans, player("Notch")))).toBe(true)
          expect(yield* bans.remove(uuid("069A79F4-44E9-4726-A5BE-FCA90E38AAF5"), "test")).toBe(true)
          expect(Option.isNone(yield* playerBanNow(bans, player("Notch", "069a79f444e94726a5befca90e38aaf5")))).toBe(true)
        })
      )
    })
  )

  it.effect("invalid targets and durations are rejected with a reason, and nothing is written", () =>
    Effect.gen(function* () {
      const file = banFile()
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          const cases: ReadonlyArray<readonly [BanTarget, RegExp]> = [
            [ip("1.2.3"), /"1\.2\.3" is not an IP address or CIDR range/],
            [ip("127.1"), /not an IP address/],
            [ip("1.2.3.4/33"), /not an IP address or CIDR range/],
            [ip("1.2.3.4/"), /not an IP address or CIDR range/],
            [ip("2001:db8::/129"), /not an IP address or CIDR range/],
            [ip("example.com"), /not an IP address/],
            [username(""), /is not a player name/],
            [username("has space"), /is not a player name/],
            [username("x".repeat(17)), /is not a player name/],
            [uuid("not-a-uuid"), /is not a UUID/],
            [uuid("069a79f4"), /is not a UUID/],
            [uuid("069a79f4-44e94726-a5be-fca90e38aaf5"), /is not a UUID/]
          ]
          for (const [target, reason] of cases) {
            const error = yield* Effect.flip(bans.add({ target, reason: "", source: "test" }))
            expect(error._tag).toBe("BanStoreError")
            expect(error.reason).toMatch(reason)
            expect((yield* Effect.flip(bans.remove(target, "test"))).reason).toMatch(reason)
          }
          const zero = yield* Effect.flip(bans.add({ target: username("Steve"), reason: "", source: "test", duration: 0 }))
          expect(zero.reason).toMatch(/longer than 0/)
          // Typed as DurationInput, but a caller decoding JSON may still pass anything: a failure, not a defect.
          const input: { duration: Duration.DurationInput } = JSON.parse(`{"duration":"soon"}`)
          const malformed = yield* Effect.flip(bans.add({ target: username("Steve"), reason: "", source: "test", ...input }))
          expect(malformed.reason).toBe(`"soon" is not a duration`)
          expect(yield* bans.list).toEqual([])
        })
      )
      expect(existsSync(file)).toBe(false)
    })
  )
})

describe("expiry", () => {
  it.effect("a 1h ban applies at 59m59s and not at 1h; the purge removes it from the file and audits it", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      const interval = Duration.minutes(5)
      yield* withStore(
        file,
        (bans) =>
          Effect.gen(function* () {
            const ban = yield* bans.add({ target: username("Steve"), reason: "cool down", source: "test", duration: "1 hour" })
            expect(ban.expires_at).toBe(T0_SECONDS + 3600)
            yield* bans.add({ target: ip("203.0.113.0/24"), reason: "range", source: "test", duration: Duration.hours(1) })
            yield* bans.add({ target: username("Alex"), reason: "forever", source: "test" })

            yield* TestClock.adjust("59 minutes")
            yield* TestClock.adjust("59 seconds")
            expect(Option.isSome(yield* playerBanNow(bans, player("steve")))).toBe(true)
            expect(Option.isSome(yield* ipBanNow(bans, "203.0.113.9"))).toBe(true)
            expect((yield* bans.list).map((b) => b.target.value)).toEqual(["Steve", "203.0.113.0/24", "Alex"])

            yield* TestClock.adjust("1 second")
            expect(Option.isNone(yield* playerBanNow(bans, player("steve")))).toBe(true)
            expect(Option.isNone(yield* ipBanNow(bans, "203.0.113.9"))).toBe(true)
            expect((yield* bans.list).map((b) => b.target.value)).toEqual(["Alex"])

            yield* purgeUntil(
              interval,
              Effect.map(bans.audit, (audit) => audit.filter((entry) => entry.action === "expire").length === 2)
            )
            expect(readJson(file).bans.map((b) => b.target.value)).toEqual(["Alex"])
            const expired = readJson(file).audit_log.filter((entry) => entry.action === "expire")
            expect(expired.map((entry) => entry.target.value)).toEqual(["Steve", "203.0.113.0/24"])
            expect(expired[0]).toMatchObject({ reason: "cool down", expires_at: T0_SECONDS + 3600 })
            expect(expired[0]!.at).toBeGreaterThanOrEqual(T0_SECONDS + 3600)
            expect((yield* bans.audit).map((entry) => entry.action)).toEqual(["ban", "ban", "ban", "expire", "expire"])
          }),
        { purgeInterval: interval }
      )
    })
  )

  it.effect("removing a ban that already ran out returns false and is recorded as an expiry", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      yield* withStore(
        file,
        (bans) =>
          Effect.gen(function* () {
            yield* bans.add({ target: username("Steve"), reason: "", source: "test", duration: "10 minutes" })
            yield* TestClock.adjust("10 minutes")
            expect(yield* bans.remove(username("Steve"), "admin")).toBe(false)
            expect(readJson(file).bans).toEqual([])
            expect((yield* bans.audit).map((entry) => entry.action)).toEqual(["ban", "expire"])
          }),
        { purgeInterval: Duration.days(1) }
      )
    })
  )
})

describe("audit log", () => {
  const seedAudit = (file: string, count: number) => {
    const audit_log = Array.from({ length: count }, (_, i) => ({
      at: T0_SECONDS - count + i,
      action: "ban",
      target: { type: "username", value: `old${i}` },
      reason: "",
      source: "seed",
      expires_at: null
    }))
    writeFileSync(file, JSON.stringify({ bans: [], audit_log }))
  }

  it.effect("keeps the last 1000 entries", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      seedAudit(file, 1000)
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          yield* bans.add({ target: username("Steve"), reason: "r", source: "admin" })
          yield* bans.remove(username("Steve"), "admin")
          const audit = yield* bans.audit
          expect(audit).toHaveLength(1000)
          expect(audit[0]!.target.value).toBe("old2")
          expect(audit.slice(-2)).toEqual([
            { at: T0_SECONDS, action: "ban", target: username("Steve"), reason: "r", source: "admin", expires_at: null },
            { at: T0_SECONDS, action: "unban", target: username("Steve"), source: "admin" }
          ])
          expect(readJson(file).audit_log).toEqual(audit)
        })
      )
    })
  )

  it.effect("logs one line per ban, unban and expiry when enabled", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      yield* withStore(banFile(), (bans) =>
        Effect.gen(function* () {
          yield* bans.add({ target: username("Steve"), reason: "griefing", source: "admin", duration: "2 hours" })
          yield* bans.add({ target: ip("203.0.113.7"), reason: "spam", source: "api" })
          yield* bans.remove(ip("203.0.113.7"), "api")
        })
      )
      const audit = logs.lines.filter((line) => /ban (added|removed|expired)/.test(line))
      expect(audit).toEqual([
        `INFO ban added: username Steve (until 2025-01-01T02:00:00.000Z, reason "griefing", source "admin")`,
        `INFO ban added: ip 203.0.113.7 (permanent, reason "spam", source "api")`,
        `INFO ban removed: ip 203.0.113.7 (source "api")`
      ])
    }).pipe(Effect.provide(logs.layer))
  })

  it.effect("when disabled, nothing is logged and the audit log stays as it was", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      seedAudit(file, 3)
      const before = readJson(file).audit_log
      yield* withStore(
        file,
        (bans) =>
          Effect.gen(function* () {
            yield* bans.add({ target: username("Steve"), reason: "", source: "admin", duration: "1 minute" })
            yield* bans.add({ target: username("Alex"), reason: "", source: "admin" })
            yield* bans.remove(username("Alex"), "admin")
            yield* TestClock.adjust("1 minute")
            yield* purgeUntil(Duration.minutes(1), Effect.sync(() => readJson(file).bans.length === 0))
            expect(yield* bans.audit).toEqual(before)
          }),
        { audit: false, purgeInterval: Duration.minutes(1) }
      )
      expect(readJson(file).audit_log).toEqual(before)
      expect(logs.lines.filter((line) => /ban (added|removed|expired)/.test(line))).toEqual([])
    }).pipe(Effect.provide(logs.layer))
  })
})

describe("the file", () => {
  it.effect("is written in the documented shape, one record per line, and read back at the next start", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          yield* bans.add({ target: username("Steve"), reason: "griefing", source: "admin", duration: "1 day" })
          yield* bans.add({ target: ip("203.0.113.0/24"), reason: "spam", source: "api" })
        })
      )
      const text = readFileSync(file, "utf8")
      expect(text).toContain(
        `{"target":{"type":"username","value":"Steve"},"reason":"griefing","expires_at":${T0_SECONDS + 86400},"created_at":${T0_SECONDS},"source":"admin"}`
      )
      expect(Object.keys(JSON.parse(text) as object)).toEqual(["bans", "audit_log"])
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          expect((yield* bans.list).map((ban) => ban.target.value)).toEqual(["Steve", "203.0.113.0/24"])
          expect(yield* bans.audit).toHaveLength(2)
        })
      )
    })
  )

  it.effect("accepts hand-written records without reason, source or created_at, and unknown fields", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      writeFileSync(
        file,
        JSON.stringify({ bans: [{ target: { type: "username", value: "Steve" }, expires_at: null, note: "kept out" }], extra: 1 })
      )
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          expect(yield* bans.list).toEqual([
            { target: username("Steve"), reason: "", created_at: T0_SECONDS, expires_at: null, source: "file" }
          ])
          expect(yield* bans.audit).toEqual([])
        })
      )
    })
  )

  it.effect("two hand-written records of one target: the one that lasts longer holds, whichever comes first", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      const soon = T0_SECONDS + 60
      writeFileSync(
        file,
        JSON.stringify({
          bans: [
            { target: { type: "username", value: "dup" }, expires_at: null, reason: "for good" },
            { target: { type: "username", value: "DUP" }, expires_at: soon, reason: "stray line" },
            { target: { type: "ip", value: "127.0.0.5" }, expires_at: soon, reason: "short" },
            { target: { type: "ip", value: "::ffff:127.0.0.5" }, expires_at: soon + 3600, reason: "longer" }
          ]
        })
      )
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          const list = yield* bans.list
          expect(list.map((ban) => [ban.target.value, ban.reason])).toEqual([
            ["dup", "for good"],
            ["127.0.0.5", "longer"]
          ])
          // Past the short one's end, both still hold.
          yield* TestClock.adjust("2 minutes")
          expect((yield* bans.list).map((ban) => ban.reason)).toEqual(["for good", "longer"])
        })
      )
    })
  )

  it("refuses an expiry no date can hold, or one written in milliseconds past the year 9999", () => {
    const record = (expires: number) => JSON.stringify({ bans: [{ target: { type: "username", value: "Steve" }, expires_at: expires }] })
    expect(Either.isRight(decodeBanFile(record(253_402_300_799), 0))).toBe(true)
    for (const expires of [1e13, 1e300]) {
      const decoded = decodeBanFile(record(expires), 0)
      expect(Either.isLeft(decoded) && decoded.left).toMatch(/expected a time in epoch seconds, up to the year 9999/)
    }
  })

  it.effect("a missing file means no bans and is created at the first write, with its directory", () =>
    Effect.gen(function* () {
      const file = path.join(makeConfigDir().root, "data", "bans.json")
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          expect(yield* bans.list).toEqual([])
          expect(existsSync(file)).toBe(false)
          yield* bans.add({ target: username("Steve"), reason: "", source: "test" })
          expect(readJson(file).bans).toHaveLength(1)
        })
      )
    })
  )

  it.effect("a corrupt file at start is moved to .bak, then to a timestamped .bak, and the store starts empty", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      const file = banFile()
      writeFileSync(file, "{ this is not json")
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          expect(yield* bans.list).toEqual([])
          expect(existsSync(file)).toBe(false)
          expect(readFileSync(`${file}.bak`, "utf8")).toBe("{ this is not json")
          yield* bans.add({ target: username("Steve"), reason: "", source: "test" })
        })
      )
      expect(logs.lines.find((line) => line.startsWith("ERROR"))).toMatch(
        new RegExp(`^ERROR ${file.replaceAll(".", "\\.")}: the ban file is unreadable \\(not valid JSON .*moved it to .*bans\\.json\\.bak`)
      )

      // Valid JSON of the wrong shape; the first backup is taken, so the second gets the time in its name.
      const wrong = JSON.stringify({ bans: [{ target: { type: "ip", value: "1.2.3" }, expires_at: "soon" }] })
      writeFileSync(file, wrong)
      yield* TestClock.adjust("1 second")
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          expect(yield* bans.list).toEqual([])
        })
      )
      expect(readFileSync(`${file}.bak.${T0 + 1000}`, "utf8")).toBe(wrong)
      expect(readFileSync(`${file}.bak`, "utf8")).toBe("{ this is not json")
      const error = logs.lines.filter((line) => line.startsWith("ERROR"))[1]
      expect(error).toContain(`bans.0.target: "1.2.3" is not an IP address or CIDR range`)
      expect(error).toContain("bans.0.expires_at: ")
      expect(error).toContain(`moved it to ${file}.bak.${T0 + 1000}`)
    }).pipe(Effect.provide(logs.layer))
  })
})

describe("hand edits while running", () => {
  it.live("a valid edit applies within moments, a broken one is reported and changes nothing", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      const file = banFile()
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          yield* bans.add({ target: username("Steve"), reason: "", source: "test" })
          // Our own writes are not taken for edits.
          yield* Effect.sleep("400 millis")
          expect(logs.lines.filter((line) => line.includes("changed on disk"))).toEqual([])

          const now = Math.floor(Date.now() / 1000)
          const edited = {
            bans: [
              { target: { type: "username", value: "Alex" }, reason: "by hand", expires_at: null, created_at: now, source: "ops" },
              { target: { type: "ip", value: "198.51.100.0/24" }, reason: "by hand", expires_at: now + 3600, created_at: now, source: "ops" }
            ],
            audit_log: []
          }
          const started = Date.now()
          writeFileSync(file, JSON.stringify(edited, null, 2))
          yield* eventually(Effect.map(playerBanNow(bans, player("alex")), Option.isSome), "the edit to apply")
          expect(Date.now() - started).toBeLessThan(2_000)
          expect(Option.isNone(yield* playerBanNow(bans, player("steve")))).toBe(true)
          expect(Option.isSome(yield* ipBanNow(bans, "198.51.100.20"))).toBe(true)

          // Broken by hand: reported once, the bans stay, and changes are refused rather than overwriting the edit.
          writeFileSync(file, `{"bans": [{"target": {"type": "username", "value": "Bob"}`)
          yield* eventually(
            Effect.sync(() => logs.lines.some((line) => line.startsWith("ERROR") && line.includes("unreadable"))),
            "the broken edit to be reported"
          )
          expect(logs.lines.find((line) => line.includes("unreadable"))).toContain(`${file}: the ban file is unreadable (not valid JSON`)
          expect(logs.lines.find((line) => line.includes("unreadable"))).toContain("keeping the 2 ban(s) loaded before")
          expect(Option.isSome(yield* playerBanNow(bans, player("alex")))).toBe(true)
          expect(Option.isNone(yield* playerBanNow(bans, player("bob")))).toBe(true)
          expect(existsSync(`${file}.bak`)).toBe(false)
          const refused = yield* Effect.flip(bans.add({ target: username("Carl"), reason: "", source: "test" }))
          expect(refused.reason).toMatch(/is unreadable .*fix or remove it before changing bans/)

          // Fixed the way editors save: a new file renamed over the old one.
          const fixed = { bans: [{ target: { type: "username", value: "Bob" }, reason: "", expires_at: null, created_at: now, source: "ops" }] }
          writeFileSync(`${file}.swp`, JSON.stringify(fixed))
          renameSync(`${file}.swp`, file)
          yield* eventually(Effect.map(playerBanNow(bans, player("bob")), Option.isSome), "the fixed edit to apply")
          expect(Option.isNone(yield* playerBanNow(bans, player("alex")))).toBe(true)
          yield* bans.add({ target: username("Carl"), reason: "", source: "test" })
          expect(readJson(file).bans.map((ban) => ban.target.value)).toEqual(["Bob", "Carl"])
          expect(logs.lines.filter((line) => line.startsWith("ERROR"))).toHaveLength(1)
        })
      )
    }).pipe(Effect.provide(logs.layer))
  })

  it.live("an edit saved by hand while a change is being written is kept, and the change made on top of it", () =>
    Effect.gen(function* () {
      const file = banFile()
      // An editor saves the file (as it read it before Portal's write, plus a ban) just as Portal writes its own.
      let editing = false
      const editDuringWrite = Layer.effect(
        FileSystem.FileSystem,
        Effect.map(FileSystem.FileSystem, (fs) => ({
          ...fs,
          open: (target: string, options?: FileSystem.OpenFileOptions) => {
            if (editing && path.basename(target).startsWith(".bans.json.tmp-")) {
              editing = false
              const edited = JSON.parse(readFileSync(file, "utf8")) as { bans: Array<unknown> }
              edited.bans.push({ target: { type: "username", value: "Alex" }, reason: "by hand", expires_at: null })
              writeFileSync(`${file}.swp`, JSON.stringify(edited))
              renameSync(`${file}.swp`, file)
            }
            return fs.open(target, options)
          }
        }))
      ).pipe(Layer.provide(NodeFileSystem.layer))
      const layer = BanStore.Default.pipe(Layer.provide(ConfigStore.layerStatic(snapshotFor(file, {}))), Layer.provide(editDuringWrite))
      yield* Effect.flatMap(BanStore, (bans) =>
        Effect.gen(function* () {
          yield* bans.add({ target: username("Steve"), reason: "", source: "test" })
          editing = true
          yield* bans.add({ target: username("Carl"), reason: "", source: "test" })
          expect(editing).toBe(false)
          expect(readJson(file).bans.map((ban) => ban.target.value)).toEqual(["Steve", "Alex", "Carl"])
          expect(Option.isSome(yield* playerBanNow(bans, player("alex")))).toBe(true)
        })
      ).pipe(Effect.provide(layer))
    })
  )

  it.live("a file deleted by hand keeps the bans, and the next change writes them back", () => {
    const logs = captureLogs()
    return Effect.gen(function* () {
      const file = banFile()
      yield* withStore(file, (bans) =>
        Effect.gen(function* () {
          yield* bans.add({ target: username("Steve"), reason: "", source: "test" })
          rmSync(file)
          yield* eventually(Effect.sync(() => logs.lines.some((line) => line.includes("was removed"))), "the removal to be noticed")
          expect(Option.isSome(yield* playerBanNow(bans, player("steve")))).toBe(true)
          yield* bans.add({ target: username("Alex"), reason: "", source: "test" })
          expect(readJson(file).bans.map((ban) => ban.target.value)).toEqual(["Steve", "Alex"])
        })
      )
    }).pipe(Effect.provide(logs.layer))
  })
})

describe("bans coming into force (subscribe)", () => {
  it.live("subscribers hear of each ban made or lifted here or by hand; one never in force is not announced", () =>
    Effect.gen(function* () {
      const file = banFile()
      yield* withStore(file, (bans) =>
        Effect.scoped(
          Effect.gen(function* () {
            const received = yield* Queue.unbounded<BanChange>()
            yield* Effect.forkScoped(Stream.runForEach(yield* bans.subscribe, (change) => Queue.offer(received, change)))
            const next = Queue.take(received).pipe(
              Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => new Error("no change received") })
            )

            const steve = yield* bans.add({ target: username("Steve"), reason: "griefing", source: "test" })
            expect(yield* next).toEqual({ added: [steve], removed: [] })
            // Banned again on new terms: in force anew, and not removed.
            const again = yield* bans.add({ target: username("Steve"), reason: "still griefing", source: "test", duration: "1 hour" })
            expect(yield* next).toEqual({ added: [again], removed: [] })
            expect(yield* bans.remove(username("Steve"), "test")).toBe(true)
            expect(yield* next).toEqual({ added: [], removed: [again] })

            // By hand: a new ban, and one that had already run out (never in force, so not announced).
            const now = Math.floor(Date.now() / 1000)
            const alex = { target: username("Alex"), reason: "by hand", expires_at: null, created_at: now, source: "ops" }
            const old = { target: ip("198.51.100.7"), reason: "old", expires_at: now - 60, created_at: now - 120, source: "ops" }
            writeFileSync(file, JSON.stringify({ bans: [old, alex], audit_log: [] }))
            expect(yield* next).toEqual({ added: [alex], removed: [] })
            yield* realSleep(300) // the watch and the poll may look at the file again: nothing new is announced
            expect(yield* Queue.size(received)).toBe(0)
          })
        )
      )
    })
  )
})

describe("layerMemory", () => {
  /** Runs `use` with a store in memory only: no file, no ConfigStore, no FileSystem. */
  const withMemory = <A, E>(use: (bans: BanStore) => Effect.Effect<A, E>, options?: Parameters<typeof BanStore.layerMemory>[0]) =>
    Effect.flatMap(BanStore, use).pipe(Effect.provide(BanStore.layerMemory(options)))

  it.effect("has the same surface and the same expiry rules, on the TestClock", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      yield* withMemory(
        (bans) =>
          Effect.gen(function* () {
            const ban = yield* bans.add({ target: ip("203.0.113.77/24"), reason: "range", source: "test", duration: "1 hour" })
            expect(ban).toEqual({ target: ip("203.0.113.0/24"), reason: "range", created_at: T0_SECONDS, expires_at: T0_SECONDS + 3600, source: "test" })
            yield* bans.add({ target: uuid("069A79F444E94726A5BEFCA90E38AAF5"), reason: "alt", source: "test" })
            expect(bans.dataPlane.ipBan("::ffff:203.0.113.9", T0)?.reason).toBe("range")
            expect(bans.dataPlane.playerBan(player("Notch", "069a79f4-44e9-4726-a5be-fca90e38aaf5"), T0)?.reason).toBe("alt")
            expect(bans.dataPlane.playerBan(player("Notch"), T0)).toBeUndefined()

            yield* TestClock.adjust("59 minutes")
            yield* TestClock.adjust("59 seconds")
            expect(Option.isSome(yield* ipBanNow(bans, "203.0.113.9"))).toBe(true)
            yield* TestClock.adjust("1 second")
            expect(Option.isNone(yield* ipBanNow(bans, "203.0.113.9"))).toBe(true)
            expect((yield* bans.list).map((b) => b.reason)).toEqual(["alt"])

            // The purge runs on the TestClock too, and records the expiry.
            yield* TestClock.adjust("5 minutes")
            yield* eventually(Effect.map(bans.audit, (audit) => audit.some((entry) => entry.action === "expire")), "the purge")
            expect((yield* bans.audit).map((entry) => entry.action)).toEqual(["ban", "ban", "expire"])
            expect(yield* bans.remove(uuid("069a79f444e94726a5befca90e38aaf5"), "test")).toBe(true)
            expect((yield* Effect.flip(bans.add({ target: ip("1.2.3"), reason: "", source: "test" }))).reason).toMatch(/not an IP address/)
          }),
        { purgeInterval: Duration.minutes(5) }
      )
    })
  )

  it.effect("starts with the bans it is given, made as add makes them; an invalid one fails the layer", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(T0)
      yield* withMemory(
        (bans) =>
          Effect.gen(function* () {
            expect(bans.dataPlane.playerBan(player("STEVE"), T0)?.reason).toBe("griefing")
            expect(bans.dataPlane.ipBan("203.0.113.7", T0)?.source).toBe("seed")
            expect(yield* bans.audit).toHaveLength(2)
          }),
        {
          bans: [
            { target: username("Steve"), reason: "griefing", source: "seed" },
            { target: ip("203.0.113.7"), reason: "spam", source: "seed" }
          ]
        }
      )
      const error = yield* Effect.flip(withMemory(() => Effect.void, { bans: [{ target: uuid("nope"), reason: "", source: "seed" }] }))
      expect(error).toMatchObject({ _tag: "BanStoreError", reason: expect.stringMatching(/is not a UUID/) })
    })
  )
})

describe("crash safety", () => {
  const WRITER = path.resolve("test/peers/banWriter.mjs")
  const COMPILED = path.resolve("dist/services/BanStore.js")

  /** The writer runs the compiled store; make sure it is the code in src/. */
  const assertBuilt = () => {
    if (!existsSync(COMPILED)) throw new Error(`${COMPILED} is missing: run \`npm run build\` first (\`npm test\` does)`)
    const built = statSync(COMPILED).mtimeMs
    const sources = ["src/services/BanStore.ts", ...readdirSync("src/services/bans").map((name) => `src/services/bans/${name}`)]
    const newer = sources.filter((source) => statSync(source).mtimeMs > built)
    if (newer.length > 0) throw new Error(`dist/ is older than ${newer.join(", ")}: run \`npm run build\` first (\`npm test\` does)`)
  }

  interface Writer {
    readonly child: ChildProcess
    readonly ready: Promise<number>
    readonly exited: Promise<void>
  }

  const children: Array<ChildProcess> = []
  afterEach(() => {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  })
  const startWriter = (file: string): Writer => {
    const child = spawn(process.execPath, [WRITER, file], { stdio: ["pipe", "pipe", "pipe"] })
    children.push(child)
    let output = ""
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    const ready = new Promise<number>((resolve, reject) => {
      child.stdout!.on("data", (chunk: Buffer) => {
        output += chunk.toString()
        const match = /ready (\d+)/.exec(output)
        if (match !== null) resolve(Number(match[1]))
      })
      child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
      void exited.then(() => reject(new Error(`the writer exited before it was ready:\n${output}`)))
    })
    ready.catch(() => undefined) // a writer killed before it starts is not an error
    return { child, ready, exited }
  }

  /** The file must be whole and hold p0, p1, ... p(n-1) in order: a prefix of the writes (none yet: no file). */
  const checkPrefix = (file: string): number => {
    if (!existsSync(file)) return 0
    const json = readJson(file)
    const names = json.bans.map((ban) => ban.target.value)
    expect(names).toEqual(names.map((_, i) => `p${i}`))
    expect(json.audit_log.length).toBeLessThanOrEqual(1000)
    return names.length
  }

  it("a writer killed at random moments always leaves a complete file holding a prefix of its writes", { timeout: 30_000 }, async () => {
    assertBuilt()
    const file = banFile()
    // 20 kills, unless a busy machine makes that slow: then at least 10, and none started after the time budget.
    const deadline = Date.now() + 6_000
    let kills = 0
    let written = 0
    let strayTempFiles = 0
    // Writers load their modules ahead (most of their start-up), in parallel with the one being killed.
    const queue = [startWriter(file), startWriter(file)]
    try {
      for (; kills < 20 && (kills < 10 || Date.now() < deadline); kills++) {
        const writer = queue.shift()!
        queue.push(startWriter(file))
        writer.child.stdin!.write("go\n")
        const found = await writer.ready
        expect(found).toBe(written)
        await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 55))
        writer.child.kill("SIGKILL")
        await writer.exited
        const now = checkPrefix(file)
        expect(now).toBeGreaterThanOrEqual(written)
        written = now
        strayTempFiles += readdirSync(path.dirname(file)).filter((name) => name.includes(".tmp-")).length
      }
    } finally {
      for (const writer of queue) writer.child.kill("SIGKILL")
      await Promise.all(queue.map((writer) => writer.exited))
    }
    expect(written).toBeGreaterThan(0)
    // A fresh start reads every completed write and clears temporary files an interrupted write left.
    const loaded = await Effect.runPromise(withStore(file, (bans) => Effect.map(bans.list, (list) => list.length)))
    expect(loaded).toBe(written)
    expect(readdirSync(path.dirname(file)).filter((name) => name.includes(".tmp-"))).toEqual([])
    console.log(`crash test: ${written} writes survived ${kills} kills; ${strayTempFiles} temporary file(s) left mid-write`)
  })
})

describe("banMessage", () => {
  const ban = (expires_at: number | null, reason = "Griefing"): Ban => ({
    target: username("Steve"),
    reason,
    created_at: 0,
    expires_at,
    source: "test"
  })
  const NOW = 1_700_000_000

  it("says the player is banned, why, and that the ban is permanent", () => {
    const text = banMessage(ban(null), NOW)
    expect(text).toContain("You are banned")
    expect(text).toContain("Reason: §fGriefing")
    expect(text).toContain("This ban is permanent.")
    expect(banMessage(ban(null, ""), NOW)).not.toContain("Reason")
  })

  it("gives the time left in the largest two units", () => {
    expect(banMessage(ban(NOW + 3 * 86400 + 4 * 3600 + 59), NOW)).toContain("Expires in 3d 4h.")
    expect(banMessage(ban(NOW + 7 * 86400), NOW)).toContain("Expires in 7d.")
    expect(banMessage(ban(NOW + 2 * 3600 + 13 * 60 + 30), NOW)).toContain("Expires in 2h 13m.")
    expect(banMessage(ban(NOW + 5 * 60 + 10), NOW)).toContain("Expires in 5m 10s.")
    expect(banMessage(ban(NOW + 42), NOW)).toContain("Expires in 42s.")
    expect(banMessage(ban(NOW + 42), NOW + 41.5)).toContain("Expires in 1s.")
    expect(banMessage(ban(NOW + 3600), NOW)).not.toContain("permanent")
  })
})
