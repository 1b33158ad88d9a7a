/** Portal's one logger: a line per event, human-readable (`pretty`) or one JSON object per line (`json`). */
import * as Cause from "effect/Cause"
import * as Layer from "effect/Layer"
import * as List from "effect/List"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import { logFieldsOf } from "../services/log/connectionFields.js"

export type LogFormat = "pretty" | "json"

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "none"] as const
export type LogLevelName = (typeof LOG_LEVELS)[number]

export const logLevelOf: Record<LogLevelName, LogLevel.LogLevel> = {
  trace: LogLevel.Trace,
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  error: LogLevel.Error,
  fatal: LogLevel.Fatal,
  none: LogLevel.None
}

export const messageText = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return parts.map((part) => (typeof part === "string" ? part : JSON.stringify(part))).join(" ")
}

// C0 and C1 controls, DEL, and the Unicode line and paragraph separators some viewers break lines at.
const CONTROL_CHARACTERS = "\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029"
const CONTROL = new RegExp(`[${CONTROL_CHARACTERS}]`, "g")
const NEEDS_QUOTES = new RegExp(`[\\s"=${CONTROL_CHARACTERS}]`)

const NAMED_ESCAPES: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" }

/** A control character as an escape (`\n`, `\x1b`): text from outside (a player's name) must not start a line of its own. */
const escapeControl = (char: string): string => {
  const code = char.charCodeAt(0)
  return NAMED_ESCAPES[char] ?? (code > 0xff ? `\\u${code.toString(16)}` : `\\x${code.toString(16).padStart(2, "0")}`)
}

const jsonEscape = (char: string): string => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`

/** The text with every control character escaped, so that an event stays on its line and no escape reaches a terminal. */
export const printable = (text: string): string => text.replace(CONTROL, escapeControl)

const indented = (text: string): string =>
  text
    .split("\n")
    .map((line) => `  ${printable(line)}`)
    .join("\n")

const quoteIfNeeded = (value: unknown): string => {
  const text = typeof value === "string" ? value : JSON.stringify(value)
  // JSON escapes control characters below 0x20 and quotes; the C1 range it leaves is escaped after.
  return NEEDS_QUOTES.test(text) ? printable(JSON.stringify(text)) : text
}

const COLORS: Record<string, string> = {
  TRACE: "\x1b[90m",
  DEBUG: "\x1b[36m",
  INFO: "\x1b[32m",
  WARN: "\x1b[33m",
  ERROR: "\x1b[31m",
  FATAL: "\x1b[35m"
}

/**
 * Writes one log line to standard output. If the output fails (the pipe's reader went away: EPIPE), log lines are
 * dropped from then on and the proxy keeps serving; without an error listener Node would end the process.
 */
let outputFailed = false
let guarded = false
const writeLine = (line: string): void => {
  if (!guarded) {
    guarded = true
    process.stdout.on("error", (error: NodeJS.ErrnoException) => {
      if (outputFailed) return
      outputFailed = true
      process.stderr.write(`portal: standard output failed (${error.code ?? error.message}); log lines are dropped from now on\n`)
    })
    process.stderr.on("error", () => {})
  }
  if (!outputFailed) process.stdout.write(line)
}

export const prettyLogger = (colors: boolean) =>
  Logger.make(({ annotations, cause, context, date, logLevel, message, spans }) => {
    const level = logLevel.label
    const tag = colors ? `${COLORS[level] ?? ""}${level.padEnd(5)}\x1b[0m` : level.padEnd(5)
    let line = `${date.toISOString()} ${tag} ${printable(messageText(message))}`
    for (const [key, value] of logFieldsOf({ annotations, context })) line += ` ${key}=${quoteIfNeeded(value)}`
    for (const span of List.toArray(spans)) line += ` ${span.label}=${date.getTime() - span.startTime}ms`
    // A cause (a stack trace) keeps its lines, each indented: none can pass for an event of its own.
    if (!Cause.isEmpty(cause)) line += `\n${indented(Cause.pretty(cause, { renderErrorCause: true }))}`
    writeLine(`${line}\n`)
  })

export const jsonLogger = Logger.make(({ annotations, cause, context, date, logLevel, message }) => {
  const record: Record<string, unknown> = {
    time: date.toISOString(),
    level: logLevel.label.toLowerCase(),
    message: messageText(message)
  }
  for (const [key, value] of logFieldsOf({ annotations, context })) record[key] = value
  if (!Cause.isEmpty(cause)) record.cause = Cause.pretty(cause)
  // JSON leaves DEL, the C1 controls and the separators as they are; escaped, no terminal that shows the line acts on them.
  writeLine(`${JSON.stringify(record).replace(CONTROL, jsonEscape)}\n`)
})

/** Replaces Effect's default logger and sets the minimum level. */
export const loggingLayer = (format: LogFormat, level: LogLevelName, colors = process.stdout.isTTY === true) =>
  Layer.merge(
    Logger.replace(Logger.defaultLogger, format === "json" ? jsonLogger : prettyLogger(colors)),
    Logger.minimumLogLevel(logLevelOf[level])
  )
