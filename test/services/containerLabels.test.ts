/** Container labels as a server file, ids from names, addresses and API version negotiation: the pure parts of discovery. */
import { NodeFileSystem } from "@effect/platform-node"
import { FetchHttpClient } from "@effect/platform"
import { Effect, Either, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { formatProblem } from "../../src/schema/problems.js"
import { negotiateApiVersion } from "../../src/services/containers/engine.js"
import { labelsToTable } from "../../src/services/containers/labels.js"
import {
  type ContainerInfo,
  containerAddress,
  containerServerId,
  fromInspect,
  fromSummary,
  serverFromContainer
} from "../../src/services/containers/servers.js"

const info = (overrides: Partial<ContainerInfo> = {}): ContainerInfo => ({
  id: "3f2a9c1b7e4d5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
  name: "mc-lobby",
  labels: { "portal.enable": "true", "portal.domains": "lobby.example.com" },
  running: true,
  created: 0,
  networks: [{ name: "bridge", ip: "172.17.0.5" }],
  published: [],
  hostNetwork: false,
  ...overrides
})

const Platform = Layer.merge(NodeFileSystem.layer, FetchHttpClient.layer)
const decode = (container: ContainerInfo, network?: string) =>
  Effect.runPromise(serverFromContainer(container, { network, baseDir: "/etc/portal" }).pipe(Effect.provide(Platform)))
const problemsOf = async (container: ContainerInfo) => {
  const result = await decode(container)
  return result._tag === "Skipped" ? result.problems.map(formatProblem) : []
}

describe("labels as a server file", () => {
  it("types text by what the schema expects: numbers, booleans, lists, tables; strings stay text", () => {
    const table = labelsToTable({
      "portal.enable": "true",
      "portal.port": "25566",
      "portal.max_players": "20",
      "portal.send_proxy_protocol": "true",
      "portal.domains": " a.example.com ,, b.example.com ",
      "portal.name": "007",
      "portal.disconnect_message": "a, b and c",
      "portal.timeouts.read": "1m",
      "portal.motd.online.max_players": "5",
      "portal.motd.online.text": "42",
      "portal.active_health.enabled": "false",
      "portal.server_manager.type": "local",
      "portal.server_manager.args.0": "-Xmx2G,-Xms1G",
      "portal.server_manager.args.1": "nogui",
      "other.label": "x"
    })
    expect(table.problems).toEqual([])
    expect(table.raw).toEqual({
      max_players: 20,
      send_proxy_protocol: true,
      domains: ["a.example.com", "b.example.com"],
      name: "007",
      disconnect_message: "a, b and c",
      timeouts: { read: "1m" },
      motd: { online: { max_players: 5, text: "42" } },
      active_health: { enabled: false },
      server_manager: { type: "local", args: ["-Xmx2G,-Xms1G", "nogui"] }
    })
  })

  it("leaves what does not convert as text, for the schema to refuse in its own words", () => {
    expect(labelsToTable({ "portal.max_players": "ten", "portal.send_proxy_protocol": "yes", "portal.bogus": "1" }).raw).toEqual({
      max_players: "ten",
      send_proxy_protocol: "yes",
      bogus: "1"
    })
  })

  it("refuses keys that are empty or both a value and a table", () => {
    expect(labelsToTable({ "portal.motd": "x", "portal.motd.online.text": "y", "portal.timeouts..read": "1s" }).problems).toEqual([
      { label: "portal.motd.online.text", message: "conflicts with portal.motd: a key is either a value or a table of keys" },
      { label: "portal.timeouts..read", message: "has an empty key (two dots in a row, or a dot at the end)" }
    ])
  })

  it("a label named like an object's internals is just an unknown key", async () => {
    const problems = await problemsOf(info({ labels: { ...info().labels, "portal.__proto__.polluted": "yes", "portal.constructor": "x" } }))
    expect(problems).toEqual([
      expect.stringMatching(/^container mc-lobby \(3f2a9c1b7e4d\): label portal\.__proto__: unknown key/),
      expect.stringMatching(/^container mc-lobby \(3f2a9c1b7e4d\): label portal\.constructor: unknown key/)
    ])
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined()
  })
})

describe("a container as a server", () => {
  it("decodes with the server-file schema; the id comes from the container's name, the source names the container", async () => {
    const result = await decode(info({ labels: { ...info().labels, "portal.motd.online.text": "Hi", "portal.max_players": "50" } }))
    expect(result._tag).toBe("Server")
    if (result._tag !== "Server") return
    expect(result.definition.id).toBe("mc-lobby")
    expect(result.definition.file).toBe("container mc-lobby (3f2a9c1b7e4d)")
    expect(result.definition.source).toEqual({ _tag: "Container", name: "mc-lobby", id: info().id })
    expect(result.definition.config.addresses).toEqual([{ host: "172.17.0.5", port: 25565, weight: 1 }])
    expect(result.definition.config.max_players).toBe(50)
    expect(result.definition.config.proxy_mode).toBe("passthrough")
    // portal.name sets the id, as name does in a file.
    const named = await decode(info({ labels: { ...info().labels, "portal.name": "hub" } }))
    expect(named._tag === "Server" && named.definition.id).toBe("hub")
  })

  it("names the container and the label in every problem, all at once", async () => {
    expect(
      await problemsOf(
        info({
          labels: {
            ...info().labels,
            "portal.max_players": "1.5",
            "portal.balance": "round_robbin",
            "portal.name": "Hub",
            "portal.addresses": "10.0.0.1:99999",
            "portal.timeouts.connect": "5",
            "portal.port": "http"
          }
        })
      )
    ).toEqual([
      'container mc-lobby (3f2a9c1b7e4d): label portal.port: expected a port number 1..65535, got "http"',
      'container mc-lobby (3f2a9c1b7e4d): label portal.name: "Hub" must match [a-z0-9_-]+ (lower-case letters, digits, "_" and "-")',
      "container mc-lobby (3f2a9c1b7e4d): label portal.addresses (item 1): port 99999 is out of range 1..65535",
      'container mc-lobby (3f2a9c1b7e4d): label portal.balance: expected one of "first_available", "round_robin", "least_conn", got "round_robbin" (did you mean "round_robin"?)',
      "container mc-lobby (3f2a9c1b7e4d): label portal.max_players: expected an integer, got 1.5",
      'container mc-lobby (3f2a9c1b7e4d): label portal.timeouts.connect: expected a duration such as "500ms", "5s", "1h30m" or "7d", got "5"'
    ])
  })

  it("a required key missing under a table is named as the label it would be", async () => {
    expect(await problemsOf(info({ labels: { ...info().labels, "portal.server_manager.type": "panel" } }))).toEqual([
      "container mc-lobby (3f2a9c1b7e4d): label portal.server_manager.api_url: is required",
      "container mc-lobby (3f2a9c1b7e4d): label portal.server_manager.api_key: is required",
      "container mc-lobby (3f2a9c1b7e4d): label portal.server_manager.server_id: is required"
    ])
  })

  it("a container with no address says how to give one", async () => {
    expect(await problemsOf(info({ networks: [{ name: "none", ip: "" }] }))).toEqual([
      "container mc-lobby (3f2a9c1b7e4d): has no address: it is on no network with an IP and publishes no host port for 25565; set portal.addresses (or portal.port to the port the server listens on)"
    ])
  })

  it("relative paths in labels resolve against proxy.toml's directory", async () => {
    const result = await decode(
      info({ labels: { ...info().labels, "portal.server_manager.type": "local", "portal.server_manager.command": "java", "portal.server_manager.working_dir": "mc/lobby" } })
    )
    expect(result._tag === "Server" && result.definition.config.server_manager).toMatchObject({ working_dir: "/etc/portal/mc/lobby" })
  })
})

describe("server ids from container names", () => {
  it("lower case; runs of other characters become one '-'; none at either end", () => {
    expect(containerServerId({ id: "abc", name: "mc-lobby" })).toBe("mc-lobby")
    expect(containerServerId({ id: "abc", name: "My.Lobby_1" })).toBe("my-lobby_1")
    expect(containerServerId({ id: "abc", name: "games-mc..survival-1" })).toBe("games-mc-survival-1")
    expect(containerServerId({ id: "abc", name: ".Ü." })).toBe("container-abc")
  })
})

describe("addresses", () => {
  const base = info({ networks: [], published: [] })
  it("the IP on the configured network first, else on any network (by name), else host networking, else a published port", () => {
    const networks = [
      { name: "backend", ip: "10.0.1.5" },
      { name: "frontend", ip: "10.0.2.5" }
    ]
    expect(containerAddress({ ...base, networks }, 25565, "frontend")).toEqual({ address: "10.0.2.5:25565", how: "its address on network frontend" })
    expect(containerAddress({ ...base, networks }, 25570, undefined)).toEqual({ address: "10.0.1.5:25570", how: "its address on network backend" })
    expect(containerAddress({ ...base, networks }, 25565, "elsewhere")?.address).toBe("10.0.1.5:25565")
    expect(containerAddress({ ...base, networks: [{ name: "v6", ip: "fd00::5" }] }, 25565, undefined)?.address).toBe("[fd00::5]:25565")
    expect(containerAddress({ ...base, hostNetwork: true }, 25566, undefined)).toEqual({ address: "127.0.0.1:25566", how: "host networking" })
    const published = [
      { containerPort: 25565, hostIp: "::", hostPort: 40001 },
      { containerPort: 25565, hostIp: "0.0.0.0", hostPort: 40001 },
      { containerPort: 25575, hostIp: "0.0.0.0", hostPort: 40002 }
    ]
    expect(containerAddress({ ...base, published }, 25565, undefined)).toEqual({ address: "127.0.0.1:40001", how: "host port 40001 published for 25565" })
    expect(containerAddress({ ...base, published: [{ containerPort: 25565, hostIp: "192.168.1.10", hostPort: 40003 }] }, 25565, undefined)?.address).toBe(
      "192.168.1.10:40003"
    )
    expect(containerAddress({ ...base, published: [{ containerPort: 25565, hostIp: "::", hostPort: 40004 }] }, 25565, undefined)?.address).toBe("[::1]:40004")
    expect(containerAddress({ ...base, published }, 25566, undefined)).toBeUndefined()
  })

  it("reads both shapes of the API: a list entry and an inspection", () => {
    const summary = fromSummary({
      Id: "abc",
      Names: ["/mc"],
      Labels: { a: "b" },
      State: "running",
      Created: 1_700_000_000,
      HostConfig: { NetworkMode: "bridge" },
      NetworkSettings: { Networks: { b: { IPAddress: "", GlobalIPv6Address: "fd00::1" }, a: { IPAddress: "172.17.0.2" } } },
      Ports: [{ PrivatePort: 25565, Type: "tcp" }, { IP: "0.0.0.0", PrivatePort: 25565, PublicPort: 1234, Type: "tcp" }, { IP: "0.0.0.0", PrivatePort: 19132, PublicPort: 19132, Type: "udp" }]
    })
    expect(summary).toEqual({
      id: "abc",
      name: "mc",
      labels: { a: "b" },
      running: true,
      created: 1_700_000_000_000,
      networks: [{ name: "a", ip: "172.17.0.2" }, { name: "b", ip: "fd00::1" }],
      published: [{ containerPort: 25565, hostIp: "0.0.0.0", hostPort: 1234 }],
      hostNetwork: false
    })
    const inspected = fromInspect({
      Id: "abc",
      Name: "/mc",
      Created: "2023-11-14T22:13:20.000Z",
      Config: { Labels: null },
      State: { Running: true, Paused: true },
      HostConfig: { NetworkMode: "host" },
      NetworkSettings: { Networks: { host: { IPAddress: "" } }, Ports: { "25565/tcp": [{ HostIp: "", HostPort: "1234" }], "25575/tcp": null } }
    })
    expect(inspected).toEqual({
      id: "abc",
      name: "mc",
      labels: {},
      running: false,
      created: 1_700_000_000_000,
      networks: [{ name: "host", ip: "" }],
      published: [{ containerPort: 25565, hostIp: "", hostPort: 1234 }],
      hostNetwork: true
    })
  })
})

describe("API version negotiation", () => {
  it("the runtime's version, capped at the newest Portal knows and raised to the oldest the runtime accepts", () => {
    expect(negotiateApiVersion({ ApiVersion: "1.41" })).toEqual(Either.right("1.41"))
    expect(negotiateApiVersion({ ApiVersion: "1.52", MinAPIVersion: "1.24" })).toEqual(Either.right("1.47"))
    expect(negotiateApiVersion({ ApiVersion: "1.60", MinAPIVersion: "1.50" })).toEqual(Either.right("1.50"))
    expect(negotiateApiVersion({ ApiVersion: "1.9" })).toEqual(Either.left("the runtime speaks API 1.9; Portal needs 1.24 or newer"))
  })
})
