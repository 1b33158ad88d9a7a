/** A connection's log fields reach every log line, in both output formats, without log annotations. */
import { Effect, FiberRef, HashMap, Logger } from "effect"
import { afterEach, describe, expect, it, vi } from "vitest"
import { jsonLogger, prettyLogger } from "../../src/layers/Logging.js"
import { type ConnectionLogFields, currentConnectionLog, logFieldsOf } from "../../src/services/log/connectionFields.js"

const fieldsIn = (effect: Effect.Effect<HashMap.HashMap<string, unknown>>) =>
  Effect.runSync(
    Effect.gen(function* () {
      const annotations = yield* effect
      return logFieldsOf({ annotations, context: yield* Effect.getFiberRefs })
    })
  )

describe("logFieldsOf", () => {
  it("puts the connection's known fields first, in order, then the annotations", () => {
    const fields = fieldsIn(
      Effect.gen(function* () {
        yield* FiberRef.set(currentConnectionLog, { conn: 7, ip: "203.0.113.5" })
        return HashMap.make(["stream", "stdout"])
      })
    )
    expect(fields).toEqual([
      ["conn", 7],
      ["ip", "203.0.113.5"],
      ["stream", "stdout"]
    ])
  })

  it("lets an annotation replace a connection field of the same name", () => {
    const fields = fieldsIn(
      Effect.gen(function* () {
        yield* FiberRef.set(currentConnectionLog, { conn: 1, ip: "127.0.0.1", server: "main" })
        return HashMap.make(["server", "lobby"])
      })
    )
    expect(fields).toEqual([
      ["conn", 1],
      ["ip", "127.0.0.1"],
      ["server", "lobby"]
    ])
  })

  it("is the annotations alone outside a connection", () => {
    expect(fieldsIn(Effect.succeed(HashMap.make(["server", "lobby"])))).toEqual([["server", "lobby"]])
  })
})

describe("the loggers", () => {
  afterEach(() => {
    vi.restoreAllMocks()
  })

  /** What a logger writes for one line logged inside a connection that has reached its server. */
  const lineOf = (logger: Logger.Logger<unknown, void>, message = "Steve joined main", via = "10.0.0.2:25565"): string => {
    const written: Array<string> = []
    vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk))
      return true
    })
    Effect.runSync(
      Effect.gen(function* () {
        const fields: ConnectionLogFields = { conn: 12, ip: "198.51.100.7" }
        yield* FiberRef.set(currentConnectionLog, fields)
        fields.server = "main"
        yield* Effect.logInfo(message).pipe(Effect.annotateLogs("via", via))
      }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    )
    vi.restoreAllMocks()
    expect(written).toHaveLength(1)
    return written[0]!
  }

  it("json: the fields are properties of the record", () => {
    const record = JSON.parse(lineOf(jsonLogger))
    expect(record).toMatchObject({ level: "info", message: "Steve joined main", conn: 12, ip: "198.51.100.7", server: "main", via: "10.0.0.2:25565" })
  })

  it("pretty: the fields follow the message, the connection's first", () => {
    expect(lineOf(prettyLogger(false))).toMatch(/ INFO  Steve joined main conn=12 ip=198\.51\.100\.7 server=main via=10\.0\.0\.2:25565\n$/)
  })

  it("pretty: text from outside cannot start a line of its own or reach the terminal as an escape", () => {
    // A player's name with a newline and a colour escape, as an offline-mode Login Start may carry it.
    const line = lineOf(prettyLogger(false), "x\n2026-01-01T00:00:00.000Z ERROR forged\u001b[31m joined\u2028main", "a\u009bb\rc")
    expect(line.split("\n")).toHaveLength(2) // the line and the empty rest after its end
    expect(line).toContain("INFO  x\\n2026-01-01T00:00:00.000Z ERROR forged\\x1b[31m joined\\u2028main")
    expect(line).toContain('via="a\\x9bb\\rc"')
    expect(line).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/)
  })

  it("json: the same text stays one record, escaped by JSON", () => {
    const line = lineOf(jsonLogger, "x\nERROR forged\u009b\u2028")
    expect(line).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/)
    expect(JSON.parse(line).message).toBe("x\nERROR forged\u009b\u2028")
  })
})
