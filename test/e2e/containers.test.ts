/**
 * Container discovery end to end: Portal in this process against a fake Docker Engine API (a real HTTP server on a
 * unix socket or TCP), minecraft-protocol servers as the containers' game servers and minecraft-protocol clients as
 * the players.
 */
import { Duration, Effect } from "effect"
import { rmSync } from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import type { ServerDefinition } from "../../src/schema/decode.js"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { startPortal, type RunningPortal } from "../helpers/portal.js"
import { startPortal as startProcess } from "../helpers/process.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startWebPortal } from "../helpers/web.js"
import { waitFor } from "../helpers/wait.js"
import { type FakeDocker, startFakeDocker } from "../peers/fakeDocker.js"
import { join, ping, reasonText, startBackend } from "../peers/minecraft.js"

const proxyToml = (docker: FakeDocker, extra = "") =>
  [
    `bind = "127.0.0.1:0"`,
    `unknown_domain_behavior = "drop"`,
    `[containers]`,
    `endpoint = "${docker.endpoint}"`,
    // Events alone must keep Portal current: the fallback re-list is far away unless a test asks for it.
    `poll_interval = "1h"`,
    `reconnect_delay = "100ms"`,
    extra
  ].join("\n")

const servers = (portal: RunningPortal): Promise<Map<string, ServerDefinition>> =>
  portal.run(Effect.map(Effect.flatMap(ConfigStore, (store) => store.get), (snapshot) => new Map(snapshot.servers)))

const waitForServers = (portal: RunningPortal, check: (servers: Map<string, ServerDefinition>) => boolean, what: string) =>
  waitFor(async () => {
    const current = await servers(portal)
    return check(current) ? current : undefined
  }, { what: `${what}\n${portal.logs.join("\n")}` })

/** A container running a game server on 127.0.0.1:<port>: its "IP on the bridge network" is loopback. */
const lobbyLabels = (domain: string, port: number, extra: Record<string, string> = {}) => ({
  "portal.enable": "true",
  "portal.domains": domain,
  "portal.port": String(port),
  ...extra
})

describe("container discovery", () => {
  it("a labelled container becomes a server and players reach it through its address on the network", async () => {
    const docker = await startFakeDocker()
    const lobby = await startBackend("lobby")
    const started = docker.run({ name: "mc-lobby", labels: lobbyLabels("lobby.example.com", lobby.port), networks: { bridge: "127.0.0.1" } })
    // Not labelled, or labelled but not enabled: not servers.
    docker.run({ name: "postgres", labels: { "com.example.role": "db" }, networks: { bridge: "127.0.0.1" } })
    docker.run({ name: "mc-off", labels: { "portal.enable": "false", "portal.domains": "off.example.com" }, networks: { bridge: "127.0.0.1" } })
    const dir = makeConfigDir(proxyToml(docker))
    const portal = await startPortal(dir.configFile)

    const found = await waitForServers(portal, (s) => s.has("mc-lobby"), "the container's server")
    expect([...found.keys()]).toEqual(["mc-lobby"])
    const server = found.get("mc-lobby")!
    expect(server.file).toBe(`container mc-lobby (${started.id.slice(0, 12)})`)
    expect(server.source).toEqual({ _tag: "Container", name: "mc-lobby", id: started.id })
    expect(server.config.addresses).toEqual([{ host: "127.0.0.1", port: lobby.port, weight: 1 }])
    await portal.waitForLog(new RegExp(`container mc-lobby \\(${started.id.slice(0, 12)}\\): server mc-lobby: lobby\\.example\\.com -> 127\\.0\\.0\\.1:${lobby.port} \\(its address on network bridge\\)`))
    await portal.waitForLog(/container discovery: unix:\/\/.*docker\.sock answers \(Docker Engine - Community 27\.3\.1, API 1\.47\)/)

    expect(reasonText((await ping(portal.port, "lobby.example.com")).description)).toBe("motd of lobby")
    expect(await join(portal.port, "lobby.example.com")).toEqual({ _tag: "Kicked", reason: "kick: lobby" })
    // Requests are made in the negotiated version, with the label filter.
    expect(docker.requests.some((r) => r.path.startsWith("/v1.47/containers/json?filters=") && decodeURIComponent(r.path).includes('"portal.enable=true"'))).toBe(true)

    // A container started while Portal runs is picked up from the event stream (the re-list is an hour away).
    const survival = await startBackend("survival")
    docker.run({
      name: "mc-survival",
      labels: { "portal.enable": "true", "portal.domains": "survival.example.com" },
      ports: [{ containerPort: 25565, hostPort: survival.port }]
    })
    await waitForServers(portal, (s) => s.has("mc-survival"), "the second container's server")
    expect(await join(portal.port, "survival.example.com")).toEqual({ _tag: "Kicked", reason: "kick: survival" })
    await portal.waitForLog(new RegExp(`server mc-survival: survival\\.example\\.com -> 127\\.0\\.0\\.1:${survival.port} \\(host port ${survival.port} published for 25565\\)`))
  })

  it("the admin API shows a discovered server's source: the container, by name and id; a file's server says file", async () => {
    const docker = await startFakeDocker()
    const lobby = await startBackend("lobby")
    const started = docker.run({ name: "mc-lobby", labels: lobbyLabels("lobby.example.com", lobby.port), networks: { bridge: "127.0.0.1" } })
    const web = await startWebPortal({
      proxy: `[containers]\nendpoint = "${docker.endpoint}"\npoll_interval = "1h"\n`,
      servers: { "hub.toml": `domains = ["hub.example.com"]\naddresses = ["127.0.0.1:${lobby.port}"]\n` }
    })
    await waitForServers(web.portal, (s) => s.has("mc-lobby"), "the container's server")
    const view = await (await web.request("/api/v1/servers/mc-lobby")).json()
    expect(view).toMatchObject({
      id: "mc-lobby",
      source: "container",
      file: `container mc-lobby (${started.id.slice(0, 12)})`,
      container: { name: "mc-lobby", id: started.id },
      domains: ["lobby.example.com"]
    })
    const list = (await (await web.request("/api/v1/servers")).json()) as Array<{ id: string; source: string; container: unknown }>
    expect(list.map(({ id, source, container }) => ({ id, source, container })).sort((a, b) => a.id.localeCompare(b.id))).toEqual([
      { id: "hub", source: "file", container: null },
      { id: "mc-lobby", source: "container", container: { name: "mc-lobby", id: started.id } }
    ])
  })

  it("labels for nested tables and arrays give every option of a server file", async () => {
    const docker = await startFakeDocker()
    const backend = await startBackend("nested")
    docker.run({
      name: "My.Lobby",
      labels: {
        "portal.enable": "true",
        "portal.domains": "a.example.com, *.b.example.com",
        "portal.addresses.0.address": `127.0.0.1:${backend.port}`,
        "portal.addresses.0.weight": "3",
        "portal.addresses.1": "127.0.0.1:1",
        "portal.balance": "round_robin",
        "portal.max_players": "50",
        "portal.send_proxy_protocol": "false",
        "portal.slow_start_aggression": "1.5",
        "portal.motd.online.text": "§aHello, §bworld",
        "portal.motd.online.max_players": "99",
        "portal.motd.sleeping.text": "Zzz",
        "portal.timeouts.connect": "3s",
        "portal.ip_filter.blacklist": "10.0.0.0/8,192.168.0.0/16",
        "portal.domain_rewrite.explicit": "Internal.Example.com",
        "portal.limbo_handlers": "",
        "portal.disconnect_message": "Back soon, promise",
        "com.docker.compose.project": "games"
      }
    })
    const portal = await startPortal(makeConfigDir(proxyToml(docker)).configFile)
    // The container's name is made an id: lower case, "." becomes "-".
    const server = (await waitForServers(portal, (s) => s.has("my-lobby"), "the server")).get("my-lobby")!
    expect(server.config.domains).toEqual(["a.example.com", "*.b.example.com"])
    expect(server.config.addresses).toEqual([
      { host: "127.0.0.1", port: backend.port, weight: 3 },
      { host: "127.0.0.1", port: 1, weight: 1 }
    ])
    expect(server.config.balance).toBe("round_robin")
    expect(server.config.max_players).toBe(50)
    expect(server.config.send_proxy_protocol).toBe(false)
    expect(server.config.slow_start_aggression).toBe(1.5)
    expect(server.config.motd).toEqual({ online: { text: "§aHello, §bworld", max_players: 99 }, sleeping: { text: "Zzz" } })
    expect(Duration.toMillis(server.config.timeouts.connect!)).toBe(3000)
    expect(server.config.ip_filter.blacklist).toEqual(["10.0.0.0/8", "192.168.0.0/16"])
    expect(server.config.domain_rewrite).toEqual({ explicit: "internal.example.com" })
    expect(server.config.limbo_handlers).toEqual([])
    expect(server.config.disconnect_message).toBe("Back soon, promise")
    expect(await join(portal.port, "x.b.example.com")).toEqual({ _tag: "Kicked", reason: "kick: nested" })
    expect(backend.handshakes.at(-1)!.host).toBe("internal.example.com")
  })

  it("a container with bad labels is skipped with a message naming it and each label; the others are not", async () => {
    const docker = await startFakeDocker()
    const good = await startBackend("good")
    docker.run({ name: "mc-good", labels: lobbyLabels("good.example.com", good.port), networks: { bridge: "127.0.0.1" } })
    const bad = docker.run({
      name: "mc-bad",
      labels: lobbyLabels("bad.example.com", 25565, {
        "portal.max_players": "1.5",
        "portal.proxy_mode": "zero_cpy",
        "portal.send_proxy_protocol": "yes",
        "portal.motd.online.txet": "hi",
        "portal.domains": "ok.example.com,not a domain"
      }),
      networks: { bridge: "10.1.2.3" }
    })
    const portal = await startPortal(makeConfigDir(proxyToml(docker)).configFile)
    await waitForServers(portal, (s) => s.has("mc-good"), "the good container")
    const name = `container mc-bad \\(${bad.id.slice(0, 12)}\\)`
    await portal.waitForLog(new RegExp(`${name}: label portal\\.max_players: expected an integer, got 1\\.5 \\(container skipped\\)`))
    await portal.waitForLog(new RegExp(`${name}: label portal\\.proxy_mode: expected one of .*got "zero_cpy" \\(did you mean "zero_copy"\\?\\)`))
    await portal.waitForLog(new RegExp(`${name}: label portal\\.send_proxy_protocol: expected true or false, got "yes"`))
    await portal.waitForLog(new RegExp(`${name}: label portal\\.motd\\.online\\.txet: unknown key \\(did you mean "portal\\.motd\\.online\\.text"\\?\\)`))
    await portal.waitForLog(new RegExp(`${name}: label portal\\.motd\\.online\\.text: is required`))
    await portal.waitForLog(new RegExp(`${name}: label portal\\.domains \\(item 2\\): "not a domain" is not a domain`))
    expect([...(await servers(portal)).keys()]).toEqual(["mc-good"])
    expect(await join(portal.port, "good.example.com")).toEqual({ _tag: "Kicked", reason: "kick: good" })
    // Reported once, not on every re-list or event.
    docker.rename(bad.id, "mc-bad")
    await waitFor(() => docker.requests.filter((r) => r.path.includes(`/containers/${bad.id}/json`)).length >= 1 || undefined)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(portal.logs.filter((line) => line.includes("label portal.max_players")).length).toBe(1)

    // A label that is not a server-file key is an error like a misspelled key in a file.
    const other = docker.run({ name: "mc-typo", labels: { ...lobbyLabels("typo.example.com", 25565), "portal.max_player": "5" }, networks: { bridge: "10.1.2.4" } })
    await portal.waitForLog(
      new RegExp(`container mc-typo \\(${other.id.slice(0, 12)}\\): label portal\\.max_player: unknown key \\(did you mean "portal\\.max_players"\\?\\)`)
    )
  })

  it("follows start, stop, die, pause, unpause, rename and destroy events; players on a stopped container are not cut off", async () => {
    const docker = await startFakeDocker()
    const backend = await startBackend("events", { hold: true })
    const container = docker.run({ name: "mc-events", labels: lobbyLabels("events.example.com", backend.port), networks: { bridge: "127.0.0.1" } })
    const portal = await startPortal(makeConfigDir(proxyToml(docker)).configFile)
    await waitForServers(portal, (s) => s.has("mc-events"), "the server")
    const player = await join(portal.port, "events.example.com")
    expect(player._tag).toBe("Joined")

    docker.stop(container.id)
    await waitForServers(portal, (s) => !s.has("mc-events"), "the server to go away on stop")
    await portal.waitForLog(/container mc-events \(\w{12}\) (exited|stopped): server mc-events removed/)
    // Portal does not end the session of a removed server: its backend (still holding the player) decides.
    expect(backend.players.size).toBe(1)
    expect(await join(portal.port, "events.example.com")).toEqual({ _tag: "Closed" })

    docker.start(container.id)
    await waitForServers(portal, (s) => s.has("mc-events"), "the server back on start")
    docker.die(container.id)
    await waitForServers(portal, (s) => !s.has("mc-events"), "the server to go away on die")
    docker.start(container.id)
    await waitForServers(portal, (s) => s.has("mc-events"), "the server back")

    docker.pause(container.id)
    await waitForServers(portal, (s) => !s.has("mc-events"), "the server to go away on pause")
    docker.unpause(container.id)
    await waitForServers(portal, (s) => s.has("mc-events"), "the server back on unpause")

    // The id comes from the name: a rename makes another server.
    docker.rename(container.id, "mc-renamed")
    const renamed = await waitForServers(portal, (s) => s.has("mc-renamed") && !s.has("mc-events"), "the renamed server")
    expect(renamed.get("mc-renamed")!.file).toBe(`container mc-renamed (${container.id.slice(0, 12)})`)
    const second = await join(portal.port, "events.example.com")
    expect(second._tag).toBe("Joined")

    docker.destroy(container.id)
    await waitForServers(portal, (s) => s.size === 0, "no server after destroy")
    expect(backend.players.size).toBe(2)
    expect(portal.logs.filter((line) => /^(WARN|ERROR)/.test(line) && line.includes("container"))).toEqual([])
  })

  it("a full re-list every poll_interval catches what the events missed", async () => {
    const docker = await startFakeDocker()
    const backend = await startBackend("polled")
    const dir = makeConfigDir(proxyToml(docker).replace(`poll_interval = "1h"`, `poll_interval = "200ms"`))
    const portal = await startPortal(dir.configFile)
    const container = docker.run({ name: "mc-quiet", labels: lobbyLabels("quiet.example.com", backend.port), networks: { bridge: "127.0.0.1" } }, { silent: true })
    await waitForServers(portal, (s) => s.has("mc-quiet"), "the server from a re-list")
    container.state = "exited"
    await waitForServers(portal, (s) => !s.has("mc-quiet"), "the server gone after a re-list")
  })

  it("when the runtime goes away, the servers stay, the outage is logged once per cause, and Portal reconnects and re-lists", async () => {
    const docker = await startFakeDocker()
    const [a, b] = await Promise.all([startBackend("a"), startBackend("b")])
    const first = docker.run({ name: "mc-a", labels: lobbyLabels("a.example.com", a.port), networks: { bridge: "127.0.0.1" } })
    const portal = await startPortal(makeConfigDir(proxyToml(docker)).configFile)
    await waitForServers(portal, (s) => s.has("mc-a"), "the first server")
    await waitFor(() => docker.streams() === 1 || undefined)

    await docker.down()
    await portal.waitForLog(/WARN container discovery: .*docker\.sock.*; keeping the 1 server\(s\) defined by container labels so far, trying again every 100ms/)
    // Several reconnect attempts fail meanwhile: the outage is one warning, and one more for each other cause met
    // (here the stream closed, then the socket is gone), never a line per attempt.
    await new Promise((resolve) => setTimeout(resolve, 500))
    const warnings = portal.logs.filter((line) => line.startsWith("WARN container discovery"))
    expect(warnings.length).toBeLessThanOrEqual(2)
    expect(warnings.slice(1).every((line) => line.includes("still failing, now:"))).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(portal.logs.filter((line) => line.startsWith("WARN container discovery"))).toEqual(warnings)
    expect(await join(portal.port, "a.example.com")).toEqual({ _tag: "Kicked", reason: "kick: a" })

    // While it was away: mc-a stopped, mc-b started.
    first.state = "exited"
    docker.run({ name: "mc-b", labels: lobbyLabels("b.example.com", b.port), networks: { bridge: "127.0.0.1" } }, { silent: true })
    await docker.up()
    await portal.waitForLog(/container discovery: .*docker\.sock answers again/)
    const now = await waitForServers(portal, (s) => s.has("mc-b") && !s.has("mc-a"), "the re-list after reconnecting")
    expect([...now.keys()]).toEqual(["mc-b"])
    expect(await join(portal.port, "b.example.com")).toEqual({ _tag: "Kicked", reason: "kick: b" })
    // And events flow again.
    await waitFor(() => docker.streams() === 1 || undefined)
    docker.destroy([...docker.containers.values()].find((c) => c.name === "mc-b")!.id)
    await waitForServers(portal, (s) => s.size === 0, "the server removed by an event after reconnecting")
  })

  it("an error answer is logged with the runtime's message and retried; lines it cannot read do not break the event stream", async () => {
    const docker = await startFakeDocker()
    const backend = await startBackend("errors")
    docker.run({ name: "mc-one", labels: lobbyLabels("one.example.com", backend.port), networks: { bridge: "127.0.0.1" } })
    const portal = await startPortal(makeConfigDir(proxyToml(docker)).configFile)
    await waitForServers(portal, (s) => s.has("mc-one"), "the first server")
    await waitFor(() => docker.streams() === 1 || undefined)

    // The inspection an event asks for fails: the connection is taken down and made again.
    docker.failing = { status: 500, message: "Error response from daemon: overloaded" }
    docker.run({ name: "mc-meanwhile", labels: lobbyLabels("meanwhile.example.com", backend.port), networks: { bridge: "127.0.0.1" } })
    await portal.waitForLog(
      /WARN container discovery: HTTP 500 to GET \/containers\/\w{12}\/json: Error response from daemon: overloaded; keeping the 1 server\(s\) defined by container labels so far/
    )
    expect((await servers(portal)).has("mc-one")).toBe(true)
    docker.failing = undefined
    await portal.waitForLog(/container discovery: .* answers again/)
    await waitForServers(portal, (s) => s.has("mc-meanwhile"), "the container started during the failure, from the re-list")

    await waitFor(() => docker.streams() === 1 || undefined)
    docker.emitRaw("this is not JSON")
    docker.emitRaw(JSON.stringify({ Type: "container", Action: "start" }))
    docker.emitRaw(JSON.stringify({ Type: "network", Action: "connect", Actor: { ID: "n1", Attributes: { container: "x" } } }))
    docker.run({ name: "mc-two", labels: lobbyLabels("two.example.com", backend.port), networks: { bridge: "127.0.0.1" } })
    await waitForServers(portal, (s) => s.has("mc-two"), "a server from an event after unreadable lines")
  })

  it("Portal starts when the runtime is not there yet, and picks the containers up when it comes", async () => {
    const docker = await startFakeDocker()
    const backend = await startBackend("late")
    await docker.down()
    docker.run({ name: "mc-late", labels: lobbyLabels("late.example.com", backend.port), networks: { bridge: "127.0.0.1" } }, { silent: true })
    const portal = await startPortal(makeConfigDir(proxyToml(docker)).configFile)
    await portal.waitForLog(/WARN container discovery: cannot reach unix:\/\/.*docker\.sock \(no socket at .*docker\.sock\); keeping the 0 server\(s\)/)
    await docker.up()
    await waitForServers(portal, (s) => s.has("mc-late"), "the server once the runtime answers")
  })

  it("a container clashing with a file is left out, naming both; files win, and the container's server comes when the file goes", async () => {
    const docker = await startFakeDocker()
    const [fileBackend, containerBackend] = await Promise.all([startBackend("file"), startBackend("container")])
    const dir = makeConfigDir("", {
      "lobby.toml": `domains = ["lobby.example.com"]\naddresses = ["127.0.0.1:${fileBackend.port}"]`
    })
    dir.write("proxy.toml", proxyToml(docker))
    const clash = docker.run({ name: "mc-clash", labels: lobbyLabels("lobby.example.com", containerBackend.port), networks: { bridge: "127.0.0.1" } })
    const named = docker.run({ name: "lobby", labels: lobbyLabels("other.example.com", containerBackend.port), networks: { bridge: "127.0.0.1" } })
    const portal = await startPortal(dir.configFile)
    await portal.waitForLog(
      new RegExp(
        `ERROR container mc-clash \\(${clash.id.slice(0, 12)}\\): label portal\\.domains: domain "lobby\\.example\\.com" is already routed to server "lobby" \\(.*servers/lobby\\.toml\\) \\(server not loaded\\)`
      )
    )
    await portal.waitForLog(
      new RegExp(`ERROR container lobby \\(${named.id.slice(0, 12)}\\): server id "lobby" is already used by .*servers/lobby\\.toml \\(server not loaded\\)`)
    )
    expect([...(await servers(portal)).keys()]).toEqual(["lobby"])
    expect(await join(portal.port, "lobby.example.com")).toEqual({ _tag: "Kicked", reason: "kick: file" })

    // Two containers clashing: the older one keeps its server.
    const older = docker.run({ name: "mc-older", labels: lobbyLabels("pair.example.com", containerBackend.port), networks: { bridge: "127.0.0.1" } })
    const younger = docker.run({ name: "mc-younger", labels: lobbyLabels("pair.example.com", containerBackend.port), networks: { bridge: "127.0.0.1" } })
    await portal.waitForLog(
      new RegExp(
        `container mc-younger \\(${younger.id.slice(0, 12)}\\): label portal\\.domains: domain "pair\\.example\\.com" is already routed to server "mc-older" \\(container mc-older \\(${older.id.slice(0, 12)}\\)\\)`
      )
    )
    expect([...(await servers(portal)).keys()]).toEqual(["lobby", "mc-older"])

    rmSync(path.join(dir.serversDir, "lobby.toml"))
    await portal.run(Effect.flatMap(ConfigStore, (store) => store.rescanServers))
    const after = await waitForServers(portal, (s) => s.has("mc-clash"), "the container's server once the file is gone")
    expect(after.get("mc-clash")!.source._tag).toBe("Container")
    expect(await join(portal.port, "lobby.example.com")).toEqual({ _tag: "Kicked", reason: "kick: container" })
  })

  it("speaks to a tcp:// endpoint too", async () => {
    const docker = await startFakeDocker({ tcp: true })
    expect(docker.endpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:\d+$/)
    const backend = await startBackend("tcp")
    docker.run({ name: "mc-tcp", labels: lobbyLabels("tcp.example.com", backend.port), networks: { bridge: "127.0.0.1" } })
    const portal = await startPortal(makeConfigDir(proxyToml(docker)).configFile)
    await waitForServers(portal, (s) => s.has("mc-tcp"), "the server over TCP")
    expect(await join(portal.port, "tcp.example.com")).toEqual({ _tag: "Kicked", reason: "kick: tcp" })
    const again = await startBackend("tcp2")
    docker.run({ name: "mc-tcp2", labels: lobbyLabels("tcp2.example.com", again.port), networks: { bridge: "127.0.0.1" } })
    await waitForServers(portal, (s) => s.has("mc-tcp2"), "a server from an event over TCP")
  })

  it("--check says whether the endpoint answers and lists the servers it would discover, with their problems", async () => {
    const docker = await startFakeDocker()
    const lobby = docker.run({ name: "mc-lobby", labels: lobbyLabels("lobby.example.com", 25565), networks: { bridge: "172.18.0.5" } })
    const bad = docker.run({ name: "mc-bad", labels: { ...lobbyLabels("bad.example.com", 25565), "portal.max_players": "many" }, networks: { bridge: "172.18.0.6" } })
    const clash = docker.run({ name: "mc-clash", labels: lobbyLabels("hub.example.com", 25565), networks: { bridge: "172.18.0.7" } })
    const dir = makeConfigDir(proxyToml(docker), { "hub.toml": `domains = ["hub.example.com"]\naddresses = ["10.0.0.1"]` })
    const check = async () => {
      const run = startProcess(["--check", "--config", dir.configFile])
      const code = await run.exited()
      // Notes depend on the machine (worker_threads follows its cores).
      return { code, lines: run.output().trim().split("\n").filter((line) => !line.startsWith("note: ")) }
    }
    const answered = await check()
    expect(answered.code).toBe(0)
    expect(answered.lines).toEqual([
      expect.stringMatching(/proxy\.toml is valid: 1 server \(hub\), 1 domain, bind 127\.0\.0\.1:0$/),
      expect.stringMatching(
        /^containers: unix:\/\/.*docker\.sock answers \(Docker Engine - Community 27\.3\.1, API 1\.47\): 1 server from containers \(mc-lobby\)$/
      ),
      `  mc-lobby from container mc-lobby (${lobby.id.slice(0, 12)}): lobby.example.com -> 172.18.0.5:25565`,
      `containers: container mc-bad (${bad.id.slice(0, 12)}): label portal.max_players: expected a number, got "many" (container skipped)`,
      expect.stringMatching(
        new RegExp(
          `^containers: container mc-clash \\(${clash.id.slice(0, 12)}\\): label portal\\.domains: domain "hub\\.example\\.com" is already routed to server "hub" \\(.*hub\\.toml\\) \\(container skipped\\)$`
        )
      )
    ])
    // --check only reads: no event stream was opened.
    expect(docker.requests.some((r) => r.path.includes("/events"))).toBe(false)

    await docker.down()
    const unanswered = await check()
    expect(unanswered.code).toBe(0)
    expect(unanswered.lines.at(-1)).toMatch(
      /^containers: unix:\/\/.*docker\.sock does not answer: cannot reach unix:\/\/.*docker\.sock \(no socket at .*\); Portal keeps trying while it runs$/
    )
  })
})
