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
  const lineOf = (logger: Logger.Logger<unknown, void>): string => {
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
        yield* Effect.logInfo("Steve joined main").pipe(Effect.annotateLogs("via", "10.0.0.2:25565"))
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
})
