/**
 * ContainerDiscovery: servers from container labels (`[containers]`). Running containers labelled
 * `portal.enable=true` become servers, their `portal.<key>` labels decoded as a server file (containers/labels.ts,
 * containers/servers.ts). The servers are published through the ServerSource seam; ConfigStore merges them after the
 * files' servers (files win) and every service sees them as it sees a file's.
 *
 * Changes follow the runtime's `/events` stream (start, stop, die, destroy, pause, unpause, rename, update; a
 * container that starts, unpauses, is renamed or updated is inspected again), with a full re-list every
 * `poll_interval` in case an event is missed. When the runtime cannot be reached, the servers found so far stay, the
 * outage is logged once, and Portal reconnects every `reconnect_delay` for as long as it runs.
 *
 * Built only when `[containers]` is present (layers/Containers.ts loads this module then, and only then).
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as NodePath from "node:path"
import { parseContainerEndpoint } from "../schema/ContainerEndpoint.js"
import type { ServerDefinition } from "../schema/decode.js"
import type { Containers } from "../schema/GlobalConfig.js"
import { formatHostPort } from "../schema/HostPort.js"
import { type ConfigProblem, formatProblem } from "../schema/problems.js"
import { ConfigStore } from "./ConfigStore.js"
import { mergeSourcedServers, ServerSource } from "./config/ServerSource.js"
import {
  describeEndpoint,
  type EngineClient,
  type EngineError,
  type EngineEvent,
  makeEngineClient,
  type VersionAnswer
} from "./containers/engine.js"
import {
  type ContainerInfo,
  type ContainerServer,
  containerLabel,
  type DiscoverySettings,
  fromInspect,
  fromSummary,
  isEnabled,
  serverFromContainer
} from "./containers/servers.js"

/** How long startup waits for the first answer of the runtime before it goes on without the containers' servers. */
const STARTUP_WAIT = Duration.seconds(5)

type ContainersConfig = typeof Containers.Type

interface Entry {
  readonly info: ContainerInfo
  /** What the result was computed from: the same inputs give the same server, decoded and reported once. */
  readonly fingerprint: string
  readonly result: ContainerServer
}

const fingerprintOf = (info: ContainerInfo, network: string | undefined): string =>
  JSON.stringify([
    info.name,
    Object.entries(info.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    info.networks,
    info.published,
    info.hostNetwork,
    network
  ])

/** The older of two containers comes first (and keeps its server when they clash); then by name. */
const byAge = (a: Entry, b: Entry) =>
  a.info.created - b.info.created || (a.info.name < b.info.name ? -1 : a.info.name > b.info.name ? 1 : 0)

const describeRuntime = (answer: VersionAnswer, apiVersion: string): string => {
  const name = answer.Platform?.Name ?? "container runtime"
  return `${name}${answer.Version !== undefined ? ` ${answer.Version}` : ""}, API ${apiVersion}`
}

const describeServer = (definition: ServerDefinition): string =>
  `${definition.config.domains.length > 0 ? definition.config.domains.join(", ") : "(no domains)"} -> ` +
  definition.config.addresses.map((address) => formatHostPort(address)).join(", ")

/**
 * The containers a runtime has, made into servers. The one state of discovery: mutations run under one lock, so
 * an event and a re-list never interleave.
 */
const makeInventory = (
  settings: DiscoverySettings,
  publish: (servers: ReadonlyArray<ServerDefinition>) => Effect.Effect<void>,
  options: { readonly log: boolean }
) =>
  Effect.gen(function* () {
    const entries = new Map<string, Entry>()
    const lock = yield* Effect.makeSemaphore(1)
    let published: ReadonlyArray<ServerDefinition> = []

    const evaluate = (info: ContainerInfo) =>
      Effect.gen(function* () {
        const fingerprint = fingerprintOf(info, settings.network)
        const previous = entries.get(info.id)
        if (previous !== undefined && previous.fingerprint === fingerprint) return previous
        const result = yield* serverFromContainer(info, settings)
        // Reported when a container's server is found or changes, not on every re-list; --check prints its own.
        if (options.log && result._tag === "Skipped") {
          for (const problem of result.problems) yield* Effect.logError(`${formatProblem(problem)} (container skipped)`)
        } else if (options.log && result._tag === "Server") {
          yield* Effect.logInfo(
            `${containerLabel(info)}: server ${result.definition.id}: ${describeServer(result.definition)} (${result.how})`
          )
        }
        const entry: Entry = { info, fingerprint, result }
        return entry
      })

    const servers = () =>
      [...entries.values()]
        .sort(byAge)
        .flatMap((entry) => (entry.result._tag === "Server" ? [entry.result.definition] : []))

    const flush = Effect.suspend(() => {
      const next = servers()
      if (next.length === published.length && next.every((server, index) => server === published[index])) return Effect.void
      published = next
      return publish(next)
    })

    const removeEntry = (id: string, why: string) =>
      Effect.suspend(() => {
        const entry = entries.get(id)
        if (entry === undefined) return Effect.void
        entries.delete(id)
        return entry.result._tag === "Server" && options.log
          ? Effect.logInfo(`${containerLabel(entry.info)} ${why}: server ${entry.result.definition.id} removed`)
          : Effect.void
      })

    /** Takes a container's current state: a server when it runs with `portal.enable=true`, nothing otherwise. */
    const upsert = (info: ContainerInfo) =>
      info.running && isEnabled(info)
        ? Effect.map(evaluate(info), (entry) => void entries.set(info.id, entry))
        : removeEntry(info.id, info.running ? "is no longer labelled portal.enable=true" : "is not running")

    return {
      lock,
      /** The whole list, as a re-list gives it: containers missing from it are gone. */
      replaceAll: (infos: ReadonlyArray<ContainerInfo>) =>
        Effect.gen(function* () {
          const present = new Set(infos.map((info) => info.id))
          for (const id of [...entries.keys()]) if (!present.has(id)) yield* removeEntry(id, "is no longer running")
          for (const info of infos) yield* upsert(info)
          yield* flush
        }),
      upsert: (info: ContainerInfo) => Effect.zipRight(upsert(info), flush),
      remove: (id: string, why: string) => Effect.zipRight(removeEntry(id, why), flush),
      count: () => published.length,
      /** Every container evaluated, for `--check`. */
      results: () => [...entries.values()].sort(byAge)
    }
  })

type Inventory = Effect.Effect.Success<ReturnType<typeof makeInventory>>

/** Events that mean a container is no longer serving; the others are answered by inspecting it again. */
const GONE: ReadonlyMap<string, string> = new Map([
  ["stop", "stopped"],
  ["die", "exited"],
  ["destroy", "was removed"],
  ["pause", "was paused"]
])

const applyEvent = (client: EngineClient, apiVersion: string, inventory: Inventory, event: EngineEvent) => {
  if (event.Type !== "container") return Effect.void
  const id = event.Actor.ID
  const gone = GONE.get(event.Action)
  if (gone !== undefined) return inventory.remove(id, gone)
  return Effect.flatMap(client.inspect(apiVersion, id), (found) =>
    Option.match(found, {
      onNone: () => inventory.remove(id, "no longer exists"),
      onSome: (inspected) => inventory.upsert(fromInspect(inspected))
    })
  )
}

const settingsOf = (containers: ContainersConfig, configFile: string): DiscoverySettings => ({
  network: containers.network,
  baseDir: NodePath.dirname(NodePath.resolve(configFile))
})

const clientOf = (containers: ContainersConfig) =>
  Either.map(parseContainerEndpoint(containers.endpoint), makeEngineClient)

/**
 * Runs discovery while the scope lives: connect, list, follow events and re-list every `poll_interval`; on any
 * failure keep what is known and reconnect after `reconnect_delay`.
 */
const run = (containers: ContainersConfig, configFile: string) =>
  Effect.gen(function* () {
    const source = yield* ServerSource
    const client = clientOf(containers)
    if (Either.isLeft(client)) return yield* Effect.logError(`[containers].endpoint: ${client.left}`) // the schema checked it
    const engine = client.right
    const where = describeEndpoint(engine.endpoint)
    const inventory = yield* makeInventory(
      settingsOf(containers, configFile),
      (servers) => SubscriptionRef.set(source.servers, servers),
      { log: true }
    )
    const firstAttempt = yield* Deferred.make<void>()
    /** The causes of the outage going on, each logged once (at the first attempt that meets it); empty when none. */
    const outage = new Set<string>()
    let connectedBefore = false

    const connected = (answer: VersionAnswer, apiVersion: string) =>
      Effect.gen(function* () {
        const runtime = describeRuntime(answer, apiVersion)
        const servers = `${inventory.count()} server(s) defined by container labels (any that clash with another server are held back)`
        if (outage.size > 0) yield* Effect.logInfo(`container discovery: ${where} answers again (${runtime}); ${servers}`)
        else if (!connectedBefore) yield* Effect.logInfo(`container discovery: ${where} answers (${runtime}); ${servers}`)
        outage.clear()
        connectedBefore = true
        yield* Deferred.succeed(firstAttempt, undefined)
      })

    const failed = (error: EngineError) =>
      Effect.gen(function* () {
        if (outage.size === 0) {
          yield* Effect.logWarning(
            `container discovery: ${error.reason}; keeping the ${inventory.count()} server(s) defined by container labels so far, ` +
              `trying again every ${Duration.format(containers.reconnect_delay)}`
          )
        } else if (!outage.has(error.reason)) {
          // A runtime that closed its stream may then fail in another way (a list that times out, a 500): the
          // operator needs that cause, not only the first.
          yield* Effect.logWarning(`container discovery: still failing, now: ${error.reason}`)
        }
        outage.add(error.reason)
        yield* Deferred.succeed(firstAttempt, undefined)
      })

    const session = Effect.scoped(
      Effect.gen(function* () {
        const { answer, apiVersion } = yield* engine.version
        // The stream is open before the list is taken, so no change between the two is missed.
        const events = yield* engine.events(apiVersion)
        const relist = inventory.lock.withPermits(1)(
          Effect.flatMap(engine.list(apiVersion), (list) => inventory.replaceAll(list.map(fromSummary)))
        )
        yield* relist
        yield* connected(answer, apiVersion)
        const poll = Effect.forever(Effect.zipRight(Effect.sleep(containers.poll_interval), relist))
        const follow = Effect.forever(
          Effect.flatMap(events.take, (event) => inventory.lock.withPermits(1)(applyEvent(engine, apiVersion, inventory, event)))
        )
        return yield* Effect.raceFirst(poll, follow)
      })
    )

    yield* session.pipe(
      Effect.catchAll(failed),
      // A bug must not end discovery for the rest of the run: it is logged, and Portal connects again.
      Effect.catchAllDefect((defect) => Effect.logError("container discovery: unexpected error; connecting again", Cause.die(defect))),
      Effect.zipRight(Effect.sleep(containers.reconnect_delay)),
      Effect.forever,
      Effect.forkScoped
    )
    // Startup goes on once the runtime answered or failed to, and at the latest after STARTUP_WAIT.
    yield* Deferred.await(firstAttempt).pipe(Effect.timeout(STARTUP_WAIT), Effect.ignore)
  })

/** Discovery for the running proxy; wired by layers/Containers.ts when `[containers]` is present. */
export const ContainerDiscoveryLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const store = yield* ConfigStore
    const snapshot = yield* store.get
    const containers = snapshot.global.containers
    if (containers === undefined) return
    yield* run(containers, snapshot.configFile)
  })
)

/** What `--check` reports of `[containers]`: whether the endpoint answers, and the servers it would give. */
export interface DiscoveryCheck {
  readonly endpoint: string
  /** The runtime as it describes itself, or why it did not answer. */
  readonly answer: Either.Either<string, string>
  /** Servers that would be added, with the container each comes from. */
  readonly servers: ReadonlyArray<ServerDefinition>
  /** Label problems and clashes with files: containers that would be skipped. */
  readonly problems: ReadonlyArray<ConfigProblem>
}

/** Asks the runtime once, the way discovery would, and merges the result with the files' servers. */
export const checkContainers = (containers: ContainersConfig, configFile: string, files: ReadonlyArray<ServerDefinition>) =>
  Effect.gen(function* () {
    const client = clientOf(containers)
    if (Either.isLeft(client)) {
      const invalid: DiscoveryCheck = { endpoint: containers.endpoint, answer: Either.left(client.left), servers: [], problems: [] }
      return invalid
    }
    const engine = client.right
    const endpoint = describeEndpoint(engine.endpoint)
    const inventory = yield* makeInventory(settingsOf(containers, configFile), () => Effect.void, { log: false })
    const listed = yield* Effect.either(
      Effect.gen(function* () {
        const { answer, apiVersion } = yield* engine.version
        const list = yield* engine.list(apiVersion)
        yield* inventory.replaceAll(list.map(fromSummary))
        return describeRuntime(answer, apiVersion)
      })
    )
    if (Either.isLeft(listed)) {
      const unreachable: DiscoveryCheck = { endpoint, answer: Either.left(listed.left.reason), servers: [], problems: [] }
      return unreachable
    }
    const results = inventory.results()
    const found = results.flatMap((entry) => (entry.result._tag === "Server" ? [entry.result.definition] : []))
    const merged = mergeSourcedServers(files, found)
    const kept = new Set(merged.servers)
    const result: DiscoveryCheck = {
      endpoint,
      answer: Either.right(listed.right),
      servers: found.filter((server) => kept.has(server)),
      problems: [...results.flatMap((entry) => (entry.result._tag === "Skipped" ? entry.result.problems : [])), ...merged.problems]
    }
    return result
  })
