/**
 * The log fields of a player connection (`conn`, `ip`, `server`), kept as one mutable record in a fiber-local
 * reference instead of as log annotations. A connection's fiber sets the record once and fills it in as it learns
 * more; the loggers add its fields to every line, before the annotations.
 *
 * Why not annotations: each annotation replaces the fiber's annotation map and its fiber-local map, and at
 * connection rate the three a login made cost about as much as the rest of its fiber's own steps.
 */
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import * as GlobalValue from "effect/GlobalValue"
import * as HashMap from "effect/HashMap"

export interface ConnectionLogFields {
  readonly conn: number
  ip?: string
  server?: string
}

/**
 * The running connection's fields; undefined outside a connection (and for work done on a server's behalf). One
 * reference per process, even if this module is loaded twice, like Effect's own fiber references.
 */
export const currentConnectionLog: FiberRef.FiberRef<ConnectionLogFields | undefined> = GlobalValue.globalValue(
  Symbol.for("portal/currentConnectionLog"),
  () => FiberRef.unsafeMake<ConnectionLogFields | undefined>(undefined)
)

/**
 * Every field of a log line, in order: the connection's (`conn`, `ip`, `server`, those known), then the annotations.
 * An annotation with the same key as a connection field replaces its value.
 */
export const logFieldsOf = (options: {
  readonly annotations: HashMap.HashMap<string, unknown>
  readonly context: FiberRefs.FiberRefs
}): Array<readonly [string, unknown]> => {
  const connection = FiberRefs.getOrDefault(options.context, currentConnectionLog)
  if (connection === undefined) return HashMap.toEntries(options.annotations)
  const fields = new Map<string, unknown>([["conn", connection.conn]])
  if (connection.ip !== undefined) fields.set("ip", connection.ip)
  if (connection.server !== undefined) fields.set("server", connection.server)
  for (const [key, value] of HashMap.toEntries(options.annotations)) fields.set(key, value)
  return [...fields]
}

/** Longest text from a peer (a handshake's host, say) a log line quotes in full; up to 2 KiB could come. */
const QUOTED_MAX = 128

/** Text from a peer, quoted for a log line: cut after QUOTED_MAX characters, with its length said. */
export const quotedForLog = (text: string): string =>
  text.length <= QUOTED_MAX ? JSON.stringify(text) : `${JSON.stringify(text.slice(0, QUOTED_MAX))}... (${text.length} characters)`
