/** ConfigStore with a ServerSource: servers that are not files merged after the files', files winning, with real files. */
import { FetchHttpClient } from "@effect/platform"
import { NodeFileSystem } from "@effect/platform-node"
import { Duration, Effect, Either, Layer, Logger, ManagedRuntime, SubscriptionRef } from "effect"
import { rmSync } from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { decodeServerText, type ServerDefinition } from "../../src/schema/decode.js"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { configStoreFromFiles } from "../../src/services/config/fileStore.js"
import { mergeSourcedServers, ServerSource } from "../../src/services/config/ServerSource.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { waitFor } from "../helpers/wait.js"

const runtimes: Array<ManagedRuntime.ManagedRuntime<ConfigStore | ServerSource, unknown>> = []
afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.dispose()
})

/** A server as a container would give it. */
const sourced = (name: string, text: string): ServerDefinition => {
  const file = `container ${name} (0123456789ab)`
  const definition = Either.getOrThrow(decodeServerText(file, name, text))
  return { ...definition, source: { _tag: "Container", name, id: "0123456789ab".padEnd(64, "0") } }
}

const start = async (configFile: string) => {
  const logs: Array<string> = []
  const capture = Logger.make(({ message, logLevel }) => logs.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`))
  const runtime = ManagedRuntime.make(
    configStoreFromFiles({ configFile, pollInterval: Duration.seconds(30) }).pipe(
      Layer.provideMerge(ServerSource.layer),
      Layer.provide(Layer.merge(NodeFileSystem.layer, FetchHttpClient.layer)),
      Layer.provide(Logger.replace(Logger.defaultLogger, capture))
    )
  )
  runtimes.push(runtime)
  const { store, source } = await runtime.runPromise(Effect.all({ store: ConfigStore, source: ServerSource }))
  const ids = async () => [...(await runtime.runPromise(store.get)).servers.keys()]
  const publish = (servers: ReadonlyArray<ServerDefinition>) => runtime.runPromise(SubscriptionRef.set(source.servers, servers))
  const waitForIds = (expected: Array<string>) =>
    waitFor(async () => (JSON.stringify(await ids()) === JSON.stringify(expected) ? true : undefined), { what: `servers ${expected.join(", ")}\n${logs.join("\n")}` })
  return { runtime, store, logs, ids, publish, waitForIds }
}

describe("a ServerSource", () => {
  it("adds its servers after the files'; a clash with a file names both and leaves the sourced server out until the file goes", async () => {
    const dir = makeConfigDir("", { "lobby.toml": `domains = ["lobby.example.com"]\naddresses = ["10.0.0.1"]` })
    const portal = await start(dir.configFile)
    expect(await portal.ids()).toEqual(["lobby"])

    await portal.publish([
      sourced("mc-a", `domains = ["a.example.com"]\naddresses = ["10.0.0.2"]`),
      sourced("mc-clash", `domains = ["lobby.example.com"]\naddresses = ["10.0.0.3"]`)
    ])
    await portal.waitForIds(["lobby", "mc-a"])
    await waitFor(() =>
      portal.logs.find((line) =>
        /^ERROR container mc-clash \(0123456789ab\): label portal\.domains: domain "lobby\.example\.com" is already routed to server "lobby" \(.*lobby\.toml\) \(server not loaded\)$/.test(line)
      )
    )
    expect(portal.logs).toContain("INFO servers reloaded: added mc-a")

    // The same clash on the next publication is not reported again.
    await portal.publish([
      sourced("mc-a", `domains = ["a.example.com"]\naddresses = ["10.0.0.4"]`),
      sourced("mc-clash", `domains = ["lobby.example.com"]\naddresses = ["10.0.0.3"]`)
    ])
    await waitFor(() => portal.logs.find((line) => line === "INFO servers reloaded: changed mc-a"))
    expect(portal.logs.filter((line) => line.includes("mc-clash")).length).toBe(1)

    // Files win while they are there; when the file goes, the sourced server takes its place.
    rmSync(path.join(dir.serversDir, "lobby.toml"))
    await portal.runtime.runPromise(portal.store.rescanServers)
    await portal.waitForIds(["mc-a", "mc-clash"])
    expect((await portal.runtime.runPromise(portal.store.get)).servers.get("mc-clash")!.source._tag).toBe("Container")

    await portal.publish([])
    await portal.waitForIds([])
  })

  it("a file added later wins over a sourced server already in use", async () => {
    const dir = makeConfigDir("")
    const portal = await start(dir.configFile)
    await portal.publish([sourced("hub", `domains = ["hub.example.com"]\naddresses = ["10.0.0.2"]`)])
    await portal.waitForIds(["hub"])
    dir.write("servers/hub.toml", `domains = ["hub.example.com"]\naddresses = ["10.0.0.9"]`)
    await portal.runtime.runPromise(portal.store.rescanServers)
    await waitFor(async () => {
      const hub = (await portal.runtime.runPromise(portal.store.get)).servers.get("hub")
      return hub?.source._tag === "File" ? hub : undefined
    })
    await waitFor(() => portal.logs.find((line) => /container hub \(0123456789ab\): server id "hub" is already used by .*hub\.toml/.test(line)))
  })
})

describe("mergeSourcedServers", () => {
  it("keeps the first of two sourced servers that clash, and names a file's key for a file", () => {
    const first = sourced("one", `domains = ["x.example.com"]\naddresses = ["10.0.0.1"]`)
    const second = sourced("two", `domains = ["x.example.com"]\naddresses = ["10.0.0.2"]`)
    const merged = mergeSourcedServers([], [first, second])
    expect(merged.servers).toEqual([first])
    expect(merged.problems).toEqual([
      {
        file: "container two (0123456789ab)",
        path: "label portal.domains",
        message: 'domain "x.example.com" is already routed to server "one" (container one (0123456789ab))'
      }
    ])
    expect(mergeSourcedServers([first], [])).toEqual({ servers: [first], problems: [] })
  })
})
