/**
 * The ban file: `{"bans":[...],"audit_log":[...]}` with epoch-second times, decoded strictly with effect/Schema
 * and written back one record per line so that it stays easy to read and edit by hand (pure).
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { type BanTarget, normaliseTarget } from "./target.js"

export interface Ban {
  readonly target: BanTarget
  readonly reason: string
  /** Epoch seconds. */
  readonly created_at: number
  /** Epoch seconds; null for a permanent ban. */
  readonly expires_at: number | null
  /** Who or what made the ban (an admin API key name, a plugin, `file` for a hand edit). */
  readonly source: string
}

export type AuditAction = "ban" | "unban" | "expire"

export interface AuditEntry {
  /** Epoch seconds. */
  readonly at: number
  readonly action: AuditAction
  readonly target: BanTarget
  readonly reason?: string
  readonly source?: string
  readonly expires_at?: number | null
}

/** The audit log keeps this many most recent entries. */
export const AUDIT_LOG_LIMIT = 1000

/** The end of the year 9999: a larger value is milliseconds written by mistake, or nothing a date can hold. */
const MAX_EPOCH_SECONDS = 253_402_300_799

const EpochSeconds = Schema.Number.pipe(Schema.finite(), Schema.nonNegative(), Schema.lessThanOrEqualTo(MAX_EPOCH_SECONDS)).annotations({
  identifier: "EpochSeconds",
  message: () => "expected a time in epoch seconds, up to the year 9999"
})

const TargetFields = Schema.Struct({
  type: Schema.Literal("ip", "username", "uuid"),
  value: Schema.String
})

/** A target that must be valid; decoding gives its normal form. */
const Target = Schema.transformOrFail(TargetFields, Schema.typeSchema(TargetFields), {
  strict: true,
  decode: (target, _, ast) =>
    Either.match(normaliseTarget(target), {
      onLeft: (reason) => ParseResult.fail(new ParseResult.Type(ast, target, reason)),
      onRight: (normal) => ParseResult.succeed(normal)
    }),
  encode: (target) => ParseResult.succeed(target)
}).annotations({ identifier: "BanTarget" })

// Hand-written records may leave out reason, source and created_at; created_at is then filled in when read.
const BanRecord = Schema.Struct({
  target: Target,
  reason: Schema.optionalWith(Schema.String, { default: () => "", exact: true }),
  expires_at: Schema.NullOr(EpochSeconds),
  created_at: Schema.optionalWith(EpochSeconds, { exact: true }),
  source: Schema.optionalWith(Schema.String, { default: () => "file", exact: true })
}).annotations({ identifier: "Ban" })

// History is kept as written: a target that would not be accepted today does not make the file unreadable.
const AuditRecord = Schema.Struct({
  at: EpochSeconds,
  action: Schema.Literal("ban", "unban", "expire"),
  target: TargetFields,
  reason: Schema.optionalWith(Schema.String, { exact: true }),
  source: Schema.optionalWith(Schema.String, { exact: true }),
  expires_at: Schema.optionalWith(Schema.NullOr(EpochSeconds), { exact: true })
}).annotations({ identifier: "AuditEntry" })

const BanFileSchema = Schema.Struct({
  bans: Schema.Array(BanRecord),
  audit_log: Schema.optionalWith(Schema.Array(AuditRecord), { default: () => [], exact: true })
}).annotations({ identifier: "BanFile" })

export interface BanFileContent {
  readonly bans: ReadonlyArray<Ban>
  readonly audit: ReadonlyArray<AuditEntry>
}

const decodeContent = Schema.decodeUnknownEither(BanFileSchema, { errors: "all" })

const MAX_REPORTED_ISSUES = 5

/**
 * Reads the text of a ban file, or says what is wrong with it (`bans.2.target: "1.2.3" is not an IP address ...`).
 * An empty file holds no bans. `nowSeconds` stands in for a missing created_at.
 */
export const decodeBanFile = (text: string, nowSeconds: number): Either.Either<BanFileContent, string> => {
  if (text.trim() === "") return Either.right({ bans: [], audit: [] })
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    return Either.left(`not valid JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  const decoded = decodeContent(json)
  if (Either.isLeft(decoded)) {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
    const lines = issues
      .slice(0, MAX_REPORTED_ISSUES)
      .map((issue) => (issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message))
    if (issues.length > MAX_REPORTED_ISSUES) lines.push(`and ${issues.length - MAX_REPORTED_ISSUES} more problems`)
    return Either.left(lines.join("; "))
  }
  return Either.right({
    bans: decoded.right.bans.map((record) => ({
      target: record.target,
      reason: record.reason,
      created_at: record.created_at ?? nowSeconds,
      expires_at: record.expires_at,
      source: record.source
    })),
    audit: decoded.right.audit_log
  })
}

/** Each ban's line, made once: a ban is never changed in place, and a change writes every ban again. */
const banLines = new WeakMap<Ban, string>()

const banJson = (ban: Ban) => {
  let line = banLines.get(ban)
  if (line === undefined) {
    line = JSON.stringify({
      target: { type: ban.target.type, value: ban.target.value },
      reason: ban.reason,
      expires_at: ban.expires_at,
      created_at: ban.created_at,
      source: ban.source
    })
    banLines.set(ban, line)
  }
  return line
}

const auditJson = (entry: AuditEntry) =>
  JSON.stringify({
    at: entry.at,
    action: entry.action,
    target: { type: entry.target.type, value: entry.target.value },
    reason: entry.reason,
    source: entry.source,
    expires_at: entry.expires_at
  })

const jsonArray = (lines: ReadonlyArray<string>) => (lines.length === 0 ? "[]" : `[\n    ${lines.join(",\n    ")}\n  ]`)

/** The file text for a set of bans and an audit log: valid JSON, one record per line. */
export const encodeBanFile = (content: BanFileContent): string =>
  `{\n  "bans": ${jsonArray(content.bans.map(banJson))},\n  "audit_log": ${jsonArray(content.audit.map(auditJson))}\n}\n`
