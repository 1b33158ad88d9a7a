/**
 * ConfigStore: the current configuration as a SubscriptionRef, and the changes to it. This module is the port only,
 * light enough for a worker thread's data plane (no schemas, no file system): the file-backed implementation that
 * loads `proxy.toml` and every server file strictly and follows their changes is config/fileStore.ts; a worker
 * thread keeps a replica the main thread feeds (workers/).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type { ServerDefinition } from "../schema/decode.js"
import type { GlobalConfig } from "../schema/GlobalConfig.js"

export interface ConfigSnapshot {
  readonly configFile: string
  readonly global: GlobalConfig
  /** Servers by id, in file-name order. */
  readonly servers: ReadonlyMap<string, ServerDefinition>
  /** Increases with every applied change. */
  readonly revision: number
}

/** Options of `proxy.toml` that are bound at startup; a SIGHUP that changes them is reported, not applied. */
export const RESTART_ONLY_KEYS = [
  "bind",
  "worker_threads",
  "so_reuseport",
  "servers_dir",
  "plugins_dir",
  "ban",
  "web",
  "telemetry",
  "containers",
  "plugins"
] as const satisfies ReadonlyArray<keyof GlobalConfig>

export class ConfigStore extends Context.Tag("portal/ConfigStore")<
  ConfigStore,
  {
    readonly current: SubscriptionRef.SubscriptionRef<ConfigSnapshot>
    readonly get: Effect.Effect<ConfigSnapshot>
    /** The current snapshot followed by every change. */
    readonly changes: Stream.Stream<ConfigSnapshot>
    /** Re-reads `servers_dir` now (the watcher calls this). */
    readonly rescanServers: Effect.Effect<void>
    /** Re-reads `proxy.toml` (SIGHUP calls this); a broken file is reported and changes nothing. */
    readonly reloadGlobal: Effect.Effect<void>
  }
>() {
  /** A fixed snapshot, for tests and tools that need no files. */
  static readonly layerStatic = (snapshot: ConfigSnapshot) =>
    Layer.effect(
      ConfigStore,
      Effect.map(SubscriptionRef.make(snapshot), (current) => ({
        current,
        get: SubscriptionRef.get(current),
        changes: current.changes,
        rescanServers: Effect.void,
        reloadGlobal: Effect.void
      }))
    )
}


/**
 * The current snapshot as a plain read, for the connection path, which reads it for every connection before the
 * connection has a fiber: kept up to date by a fiber of the caller's scope that follows the changes.
 */
export const followSnapshot = (store: ConfigStore["Type"]): Effect.Effect<() => ConfigSnapshot, never, Scope.Scope> =>
  Effect.gen(function* () {
    let latest = yield* store.get
    yield* store.changes.pipe(
      Stream.runForEach((next) => Effect.sync(() => (latest = next))),
      Effect.forkScoped
    )
    return () => latest
  })
