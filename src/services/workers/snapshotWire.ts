/**
 * The configuration snapshot as it travels from the main thread to the workers: JSON text in which durations are
 * `{"_id":"Duration",...}` (Effect's own JSON form) and the servers a list of entries. The worker turns it back
 * into the same values without the schemas, which it does not load: the text comes from the main thread's own
 * decoded configuration, never from outside.
 */
import * as Duration from "effect/Duration"
import type { ConfigSnapshot } from "../ConfigStore.js"

export const encodeSnapshot = (snapshot: ConfigSnapshot): string =>
  JSON.stringify({ ...snapshot, servers: [...snapshot.servers.entries()] })

const revive = (_key: string, value: unknown): unknown => {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value
  if (!("_id" in value) || value._id !== "Duration" || !("_tag" in value)) return value
  switch (value._tag) {
    case "Millis":
      return "millis" in value && typeof value.millis === "number" ? Duration.millis(value.millis) : value
    case "Nanos": {
      const hrtime = "hrtime" in value ? value.hrtime : undefined
      return Array.isArray(hrtime) && typeof hrtime[0] === "number" && typeof hrtime[1] === "number"
        ? Duration.nanos(BigInt(hrtime[0]) * 1_000_000_000n + BigInt(hrtime[1]))
        : value
    }
    case "Infinity":
      return Duration.infinity
    default:
      return value
  }
}

interface WireSnapshot extends Omit<ConfigSnapshot, "servers"> {
  readonly servers: ReadonlyArray<readonly [string, ConfigSnapshot["servers"] extends ReadonlyMap<string, infer S> ? S : never]>
}

export const decodeSnapshot = (text: string): ConfigSnapshot => {
  // The main thread's own encoding of a snapshot it decoded (see the note above): a shape known to match.
  const wire: WireSnapshot = JSON.parse(text, revive)
  return { ...wire, servers: new Map(wire.servers) }
}
