/**
 * The bans in memory and every way to change them: add, remove, purge, with the audit log, one change at a time.
 * Where the bans are recorded is a port (`BanRecord`): the JSON file in production, nothing for the memory layer.
 * Lookups read an immutable index swapped on every change, so the connection path reads it without a fiber.
 */
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { AUDIT_LOG_LIMIT, type AuditEntry, type Ban, type BanFileContent } from "./file.js"
import { type BanIndex, buildIndex, findIpBan, findPlayerBan, isActive } from "./lookup.js"
import { type BanTarget, describeTarget, normaliseTarget, targetKey } from "./target.js"
import { banDurationProblem } from "./banDuration.js"

export class BanStoreError extends Data.TaggedError("BanStoreError")<{ readonly reason: string }> {}

export interface AddBanInput {
  readonly target: BanTarget
  readonly reason: string
  readonly source: string
  /** How long the ban lasts; without it (or infinite) the ban is permanent. */
  readonly duration?: Duration.DurationInput
}

/** A player as the login phase knows them: the UUID only where the client sent one. */
export interface BanCandidate {
  readonly name: string
  readonly uuid: string | undefined
}

/** The connection path's surface: plain synchronous lookups at a time the caller gives (epoch ms). */
export interface BanDataPlane {
  /** The ban in force for a client address (exact or range), if any. */
  readonly ipBan: (ip: string, nowMs: number) => Ban | undefined
  /** The ban in force for a player, by UUID (when known) or name, if any. */
  readonly playerBan: (player: BanCandidate, nowMs: number) => Ban | undefined
}

/** Bans that came into force or left the store: through `add` / `remove` / the purge, or found in an edit of the file. */
export interface BanChange {
  /** New targets, or targets banned again on new terms; each in force when the change applied. */
  readonly added: ReadonlyArray<Ban>
  /** Targets no longer banned: lifted, purged after expiry, or deleted from the file by hand. */
  readonly removed: ReadonlyArray<Ban>
}

/** What BanStore offers, whatever records the bans. */
export interface BanStoreSurface {
  /** Bans a target (replacing any ban of the same target); the change is recorded when this succeeds. */
  readonly add: (input: AddBanInput) => Effect.Effect<Ban, BanStoreError>
  /** Lifts the ban of a target; true when a ban in force was removed. */
  readonly remove: (target: BanTarget, source: string) => Effect.Effect<boolean, BanStoreError>
  /** Bans in force now, in the order they were made. */
  readonly list: Effect.Effect<ReadonlyArray<Ban>>
  /** The audit log, oldest first. */
  readonly audit: Effect.Effect<ReadonlyArray<AuditEntry>>
  /** The ban in force now for one address, player name or UUID, as the connection path would find it. */
  readonly check: (target: BanTarget) => Effect.Effect<Ban | undefined, BanStoreError>
  /**
   * Bans coming into force or removed from now on, for as long as the scope lives (subscribed when this runs, so
   * nothing changed after it returns is missed). For removing online players a new ban matches, and for events.
   */
  readonly subscribe: Effect.Effect<Stream.Stream<BanChange>, never, Scope.Scope>
  readonly dataPlane: BanDataPlane
}

/** Where the bans are kept besides memory. Both run with the store's lock held. */
export interface BanRecord {
  /** Takes in changes made elsewhere before a change; fails when the record cannot be trusted. */
  readonly beforeChange: Effect.Effect<void, BanStoreError>
  /**
   * Records the new content; the change applies only once this succeeds. False when the record changed elsewhere
   * since `beforeChange` (nothing written): the change is then made again on top of that change.
   */
  readonly write: (content: BanFileContent) => Effect.Effect<boolean, BanStoreError>
}

/** Times a change is made again on top of an edit that came in while it was written, before it gives up. */
const CHANGE_ATTEMPTS = 3

/** What a change does to the bans, and the audit entries to log once it is recorded. */
interface Change<A> {
  readonly result: A
  /** Undefined: nothing changes. */
  readonly next?: BanFileContent
  readonly report?: ReadonlyArray<AuditEntry>
}

interface State {
  readonly index: BanIndex
  readonly audit: ReadonlyArray<AuditEntry>
}

export const toSeconds = (millis: number) => Math.floor(millis / 1000)

const formatExpiry = (expiresAt: number | null | undefined) =>
  expiresAt === null || expiresAt === undefined ? "permanent" : `until ${new Date(expiresAt * 1000).toISOString()}`

/** One log line per audit entry: target, expiry, reason and source. */
const describeAudit = (entry: AuditEntry): string => {
  const details = [
    entry.action === "ban"
      ? formatExpiry(entry.expires_at)
      : entry.action === "expire" && typeof entry.expires_at === "number"
        ? `ended ${new Date(entry.expires_at * 1000).toISOString()}`
        : undefined,
    entry.reason === undefined ? undefined : `reason ${JSON.stringify(entry.reason)}`,
    entry.source === undefined ? undefined : `source ${JSON.stringify(entry.source)}`
  ].filter((part) => part !== undefined)
  const verb = entry.action === "ban" ? "ban added" : entry.action === "unban" ? "ban removed" : "ban expired"
  return `${verb}: ${describeTarget(entry.target)} (${details.join(", ")})`
}

const banAudit = (action: "ban" | "expire", ban: Ban, at: number): AuditEntry =>
  action === "ban"
    ? { at, action, target: ban.target, reason: ban.reason, source: ban.source, expires_at: ban.expires_at }
    : { at, action, target: ban.target, reason: ban.reason, expires_at: ban.expires_at }

const sameTerms = (a: Ban, b: Ban) =>
  a.reason === b.reason && a.expires_at === b.expires_at && a.created_at === b.created_at && a.source === b.source

/** Bans in force in `after` at `nowMs` that were not in force in `before` on the same terms. */
const addedBetween = (before: BanIndex, after: BanIndex, nowMs: number): Array<Ban> => {
  const added: Array<Ban> = []
  for (const [key, ban] of after.all) {
    const old = before.all.get(key)
    // The same record (most of them, in a change of one ban) was in force before if it is now.
    if (old === ban || !isActive(ban, nowMs)) continue
    if (old === undefined || !isActive(old, nowMs) || !sameTerms(old, ban)) added.push(ban)
  }
  return added
}

/** Bans of `before` whose target `after` no longer has. */
const removedBetween = (before: BanIndex, after: BanIndex): Array<Ban> => {
  const removed: Array<Ban> = []
  for (const [key, ban] of before.all) if (!after.all.has(key)) removed.push(ban)
  return removed
}

export interface BanState {
  /** One change at a time: `BanRecord` and every change run under it. */
  readonly lock: Effect.Semaphore
  readonly get: Effect.Effect<State>
  /** Replaces the bans (an edit of the record made elsewhere) and tells subscribers what came into force. */
  readonly replace: (content: BanFileContent) => Effect.Effect<void>
  /** The service surface on top of `record`, with expired bans purged every `purgeInterval`. */
  readonly surface: (record: BanRecord, purgeInterval: Duration.DurationInput) => Effect.Effect<BanStoreSurface, never, Scope.Scope>
}

export const makeBanState = (options: { readonly auditEnabled: boolean; readonly initial: BanFileContent }) =>
  Effect.gen(function* () {
    const { auditEnabled } = options
    const initial: State = { index: buildIndex(options.initial.bans), audit: options.initial.audit }
    const state = yield* Ref.make(initial)
    /** The state last set, read synchronously by the data plane. */
    let latest = initial
    const changes = yield* PubSub.unbounded<BanChange>()
    const lock = yield* Effect.makeSemaphore(1)

    const replace = (content: BanFileContent) =>
      Effect.gen(function* () {
        const next: State = { index: buildIndex(content.bans), audit: content.audit }
        const before = yield* Ref.getAndSet(state, next)
        latest = next
        const added = addedBetween(before.index, next.index, yield* Clock.currentTimeMillis)
        const removed = removedBetween(before.index, next.index)
        if (added.length > 0 || removed.length > 0) yield* PubSub.publish(changes, { added, removed })
      })

    const surface = (record: BanRecord, purgeInterval: Duration.DurationInput) =>
      Effect.gen(function* () {
        /**
         * Applies a change: first takes in any change made elsewhere, then records the new content, and only then
         * lets the change apply. Once the lock is held the change runs to the end, so a caller that gives up cannot
         * leave the record and memory apart.
         */
        const change = <A>(f: (current: State, nowMs: number) => Change<A>): Effect.Effect<A, BanStoreError> => {
          const attempt = (left: number): Effect.Effect<A, BanStoreError> =>
            Effect.gen(function* () {
              yield* record.beforeChange
              const { result, next, report = [] } = f(yield* Ref.get(state), yield* Clock.currentTimeMillis)
              if (next === undefined) return result
              if (!(yield* record.write(next))) {
                if (left > 1) return yield* attempt(left - 1)
                return yield* new BanStoreError({ reason: "the ban file kept changing while the change was written; try again" })
              }
              yield* replace(next)
              if (auditEnabled) yield* Effect.forEach(report, (entry) => Effect.logInfo(describeAudit(entry)), { discard: true })
              return result
            })
          return attempt(CHANGE_ATTEMPTS).pipe(Effect.uninterruptible, lock.withPermits(1))
        }

        /** The audit log after recording `entries`: unchanged when the audit log is disabled. */
        const appendAudit = (audit: ReadonlyArray<AuditEntry>, entries: ReadonlyArray<AuditEntry>) =>
          !auditEnabled || entries.length === 0 ? audit : [...audit, ...entries].slice(-AUDIT_LOG_LIMIT)

        const add = (input: AddBanInput): Effect.Effect<Ban, BanStoreError> =>
          Effect.gen(function* () {
            const target = yield* Either.mapLeft(normaliseTarget(input.target), (reason) => new BanStoreError({ reason }))
            // decodeUnknown, not decode: a caller's malformed duration is a typed failure, not a throw in here.
            const decoded = input.duration === undefined ? Option.some(Duration.infinity) : Duration.decodeUnknown(input.duration)
            if (Option.isNone(decoded)) {
              return yield* new BanStoreError({ reason: `${JSON.stringify(input.duration)} is not a duration` })
            }
            const duration = decoded.value
            const problem = banDurationProblem(duration)
            if (problem !== undefined) return yield* new BanStoreError({ reason: problem })
            return yield* change((current, nowMs) => {
              const ban: Ban = {
                target,
                reason: input.reason,
                created_at: toSeconds(nowMs),
                // Rounded up: a ban never ends before the time it was given for.
                expires_at: Duration.isFinite(duration) ? Math.ceil((nowMs + Duration.toMillis(duration)) / 1000) : null,
                source: input.source
              }
              // The index holds the bans by key already: the new ban replaces any of its target, at the end.
              const byKey = new Map(current.index.all)
              const key = targetKey(target)
              byKey.delete(key)
              byKey.set(key, ban)
              const bans = [...byKey.values()]
              const entries = [banAudit("ban", ban, toSeconds(nowMs))]
              return { result: ban, next: { bans, audit: appendAudit(current.audit, entries) }, report: entries }
            })
          })

        const remove = (target: BanTarget, source: string): Effect.Effect<boolean, BanStoreError> =>
          Effect.gen(function* () {
            const normal = yield* Either.mapLeft(normaliseTarget(target), (reason) => new BanStoreError({ reason }))
            const key = targetKey(normal)
            return yield* change((current, nowMs) => {
              const existing = current.index.all.get(key)
              if (existing === undefined) return { result: false }
              const bans = [...current.index.all.values()].filter((ban) => ban !== existing)
              // A ban that had already run out is recorded as expired, not as lifted by someone.
              const active = isActive(existing, nowMs)
              const entries: ReadonlyArray<AuditEntry> = active
                ? [{ at: toSeconds(nowMs), action: "unban", target: existing.target, source }]
                : [banAudit("expire", existing, toSeconds(nowMs))]
              return { result: active, next: { bans, audit: appendAudit(current.audit, entries) }, report: entries }
            })
          })

        /** Removes expired bans (they stopped applying at their expiry already), recording each. */
        const purge = change((current, nowMs) => {
          const all = [...current.index.all.values()]
          const expired = all.filter((ban) => !isActive(ban, nowMs))
          if (expired.length === 0) return { result: undefined }
          const entries = expired.map((ban) => banAudit("expire", ban, toSeconds(nowMs)))
          const bans = all.filter((ban) => isActive(ban, nowMs))
          return { result: undefined, next: { bans, audit: appendAudit(current.audit, entries) }, report: entries }
        }).pipe(Effect.catchAll((error) => Effect.logWarning(`expired bans not purged: ${error.reason}`)))
        yield* Effect.forkScoped(Effect.repeat(purge, Schedule.spaced(purgeInterval)))

        const result: BanStoreSurface = {
          add,
          remove,
          list: Effect.map(Effect.zip(Ref.get(state), Clock.currentTimeMillis), ([current, nowMs]): ReadonlyArray<Ban> =>
            [...current.index.all.values()].filter((ban) => isActive(ban, nowMs))
          ),
          audit: Effect.map(Ref.get(state), (current) => current.audit),
          check: (target) =>
            Effect.gen(function* () {
              const normal = yield* Either.mapLeft(normaliseTarget(target), (reason) => new BanStoreError({ reason }))
              const nowMs = yield* Clock.currentTimeMillis
              switch (normal.type) {
                case "ip":
                  return findIpBan(latest.index, normal.value, nowMs)
                case "username":
                  return findPlayerBan(latest.index, { name: normal.value, uuid: undefined }, nowMs)
                case "uuid":
                  return findPlayerBan(latest.index, { name: "", uuid: normal.value }, nowMs)
              }
            }),
          subscribe: Effect.map(PubSub.subscribe(changes), (queue) => Stream.fromQueue(queue)),
          dataPlane: {
            ipBan: (ip, nowMs) => findIpBan(latest.index, ip, nowMs),
            playerBan: (player, nowMs) => findPlayerBan(latest.index, player, nowMs)
          }
        }
        return result
      })

    const banState: BanState = { lock, get: Ref.get(state), replace, surface }
    return banState
  })
