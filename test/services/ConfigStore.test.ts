/** ConfigStore with real files: loading, hot reload of servers_dir, SIGHUP-style reload, secrets and favicons. */
import { FetchHttpClient } from "@effect/platform"
import { NodeFileSystem } from "@effect/platform-node"
import { Duration, Effect, Either, Layer, Logger, ManagedRuntime } from "effect"
import { execFileSync } from "node:child_process"
import { mkdirSync, statSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type RequestListener, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { formatProblem } from "../../src/schema/problems.js"
import { ConfigStore, type ConfigSnapshot } from "../../src/services/ConfigStore.js"
import { configStoreFromFiles, loadConfiguration } from "../../src/services/config/fileStore.js"
import { makePng } from "../helpers/png.js"
import { freePort } from "../helpers/net.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { waitFor } from "../helpers/wait.js"

const Platform = Layer.merge(NodeFileSystem.layer, FetchHttpClient.layer)
const runtimes: Array<ManagedRuntime.ManagedRuntime<ConfigStore, unknown>> = []
afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.dispose()
})

/** A store on the files, rescanned every 30 s besides its watch; `lines` has the messages it logged. */
const startStore = async (configFile: string) => {
  const lines: Array<string> = []
  const capture = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => lines.push(String(message))))
  const runtime = ManagedRuntime.make(
    configStoreFromFiles({ configFile, pollInterval: Duration.seconds(30) }).pipe(Layer.provide(Platform), Layer.provide(capture))
  )
  runtimes.push(runtime)
  const store = await runtime.runPromise(ConfigStore)
  const snapshot = () => runtime.runPromise(store.get)
  return { runtime, store, snapshot, lines }
}

const load = (configFile: string, createSecrets = true) =>
  Effect.runPromise(Effect.either(loadConfiguration(configFile, { createSecrets })).pipe(Effect.provide(Platform)))

const serverIds = (snapshot: ConfigSnapshot) => [...snapshot.servers.keys()]

describe("loading", () => {
  it("loads the example configuration of the repository", async () => {
    const result = await load(path.resolve("proxy.toml"))
    const snapshot = Either.getOrThrow(result).snapshot
    expect(serverIds(snapshot)).toEqual(["lobby", "survival"])
    expect(snapshot.servers.get("survival")!.config.addresses.map((a) => a.weight)).toEqual([1, 2])
    expect(snapshot.global.servers_dir).toBe(path.resolve("servers"))
  })

  it("reports every problem of every file at once", async () => {
    const dir = makeConfigDir(`max_connections = -1`, {
      "a.toml": `addresses = ["a"]\nbogus = 1`
    })
    // A broken proxy.toml does not hide the server files: servers_dir itself decodes.
    const first = await load(dir.configFile)
    expect(Either.isLeft(first) && first.left.problems.map(formatProblem)).toEqual([
      expect.stringMatching(/proxy\.toml: max_connections: expected an integer >= 0, got -1$/),
      expect.stringMatching(/servers\/a\.toml: bogus: unknown key/)
    ])
    expect(Either.isLeft(first) && first.left.notes).toEqual([])
    dir.write("proxy.toml", "")
    dir.write("servers/b.toml", `addresses = ["b"]\ndomains = ["x.com"]`)
    dir.write("servers/c.toml", `addresses = ["c"]\ndomains = ["x.com"]`)
    const second = await load(dir.configFile)
    const lines = Either.isLeft(second) ? second.left.problems.map(formatProblem) : []
    expect(lines).toEqual([
      expect.stringMatching(/servers\/a\.toml: bogus: unknown key/),
      expect.stringMatching(/servers\/c\.toml: domains: domain "x\.com" is already routed to server "b" \(.*servers\/b\.toml\)/)
    ])
  })

  it("checks what it can of broken files: favicons, the forwarding secret and the rules across files", async () => {
    const dir = makeConfigDir(`max_connections = -1\n[forwarding]\nmode = "legacy_guard"\nsecret_file = "s.txt"`, {
      "a.toml": `domains = ["play.example.com"]\naddresses = ["a"]\nbogus = 1\n[motd.online]\ntext = "a"\nfavicon = "missing.png"\n[motd.offline]\ntxt = "b"`,
      "b.toml": `domains = ["play.example.com"]\naddresses = ["b"]`
    })
    dir.write("s.txt", "\n")
    const result = await load(dir.configFile)
    expect(Either.isLeft(result) && result.left.problems.map(formatProblem)).toEqual([
      expect.stringMatching(/proxy\.toml: max_connections: expected an integer >= 0, got -1$/),
      expect.stringMatching(/servers\/a\.toml: bogus: unknown key/),
      expect.stringMatching(/servers\/a\.toml: motd\.offline\.txt: unknown key/),
      expect.stringMatching(/servers\/a\.toml: motd\.offline\.text: is required/),
      expect.stringMatching(/servers\/a\.toml: motd\.online\.favicon: cannot read favicon file .*missing\.png/),
      expect.stringMatching(/servers\/b\.toml: domains: domain "play\.example\.com" is already routed to server "a"/),
      expect.stringMatching(/s\.txt: the forwarding secret file is empty$/)
    ])
  })

  it("creates no forwarding secret for a configuration that does not load", async () => {
    const dir = makeConfigDir(`max_connections = -1\n[forwarding]\nmode = "legacy_guard"`)
    expect(Either.isLeft(await load(dir.configFile))).toBe(true)
    expect(() => statSync(path.join(dir.root, "forwarding.secret"))).toThrow()
  })

  it("a missing servers_dir is a clear error", async () => {
    const dir = makeConfigDir(`servers_dir = "nowhere"`)
    const result = await load(dir.configFile)
    expect(Either.isLeft(result) && result.left.problems[0]!.message).toMatch(/servers_dir does not exist/)
  })

  it("resolves relative paths against the file that names them", async () => {
    const dir = makeConfigDir(`servers_dir = "srv"\n[ban]\nfile = "data/bans.json"\n[plugins.x]\npath = "p/x.wasm"`)
    dir.write("srv/a.toml", `addresses = ["a"]\n[server_manager]\ntype = "local"\ncommand = "java"\nworking_dir = "mc"`)
    const snapshot = Either.getOrThrow(await load(dir.configFile)).snapshot
    expect(snapshot.global.ban.file).toBe(path.join(dir.root, "data/bans.json"))
    expect(snapshot.global.plugins["x"]!.path).toBe(path.join(dir.root, "p/x.wasm"))
    const manager = snapshot.servers.get("a")!.config.server_manager
    expect(manager?.type === "local" && manager.working_dir).toBe(path.join(dir.root, "srv/mc"))
  })
})

describe("forwarding secret", () => {
  it("is created with a strong random secret and mode 0600 when modern or legacy_guard is used", async () => {
    const dir = makeConfigDir("", { "a.toml": `addresses = ["a"]\nforwarding_mode = "legacy_guard"` })
    Either.getOrThrow(await load(dir.configFile))
    const secretFile = path.join(dir.root, "forwarding.secret")
    expect(statSync(secretFile).mode & 0o777).toBe(0o600)
    const secret = readFileSync(secretFile, "utf8").trim()
    expect(secret.length).toBeGreaterThanOrEqual(43)
    // An existing secret is kept.
    Either.getOrThrow(await load(dir.configFile))
    expect(readFileSync(secretFile, "utf8").trim()).toBe(secret)
  })

  it("is created with the folders it needs; a path through a file is refused by --check and startup alike", async () => {
    const dir = makeConfigDir(`[forwarding]\nmode = "modern"\nsecret_file = "keys/proxy/forwarding.secret"`, { "a.toml": `addresses = ["a"]` })
    Either.getOrThrow(await load(dir.configFile))
    expect(statSync(path.join(dir.root, "keys/proxy/forwarding.secret")).mode & 0o777).toBe(0o600)
    dir.write("plain.txt", "not a folder")
    dir.write("proxy.toml", `[forwarding]\nmode = "modern"\nsecret_file = "plain.txt/forwarding.secret"`)
    for (const createSecrets of [true, false]) {
      const result = await load(dir.configFile, createSecrets)
      expect(Either.isLeft(result) && formatProblem(result.left.problems[0]!)).toMatch(/forwarding\.secret: cannot create the forwarding secret: .*plain\.txt is not a folder/)
    }
  })

  it("is not created when no server needs it", async () => {
    const dir = makeConfigDir("[forwarding]\nmode = \"legacy\"", { "a.toml": `addresses = ["a"]` })
    Either.getOrThrow(await load(dir.configFile))
    expect(() => statSync(path.join(dir.root, "forwarding.secret"))).toThrow()
  })

  it("an empty secret file is an error", async () => {
    const dir = makeConfigDir("[forwarding]\nmode = \"modern\"\nsecret_file = \"s.txt\"", { "a.toml": `addresses = ["a"]` })
    dir.write("s.txt", "\n")
    const result = await load(dir.configFile)
    expect(Either.isLeft(result) && formatProblem(result.left.problems[0]!)).toMatch(/s\.txt: the forwarding secret file is empty/)
  })
})

describe("favicons", () => {
  let server: Server | undefined
  afterEach(() => server?.close())
  /** An HTTP server for favicon URLs on a loopback port (closed after the test); resolves with the port. */
  const serveHttp = async (handler: RequestListener): Promise<number> => {
    server = createServer(handler)
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve))
    return (server.address() as AddressInfo).port
  }

  /** A server file with a MOTD table per favicon to check, the favicon in it (its state names the table). */
  const withFavicons = (favicons: Record<string, string>) =>
    [`addresses = ["a"]`, ...Object.entries(favicons).map(([state, favicon]) => `[motd.${state}]\ntext = "${state}"\nfavicon = "${favicon}"`)].join("\n")

  it("accepts a PNG path, base64 PNG, data URI and an http URL, all turned into data URIs", async () => {
    const png = makePng()
    const port = await serveHttp((req, res) => {
      if (req.url === "/icon.png") res.end(png)
      else res.writeHead(404).end()
    })
    const dir = makeConfigDir(`[default_motd.online]\ntext = "hi"\nfavicon = "icons/default.png"`)
    dir.write("icons/default.png", png.toString("latin1"))
    writeFileSync(path.join(dir.root, "icons/default.png"), png)
    dir.write(
      "servers/a.toml",
      [
        `addresses = ["a"]`,
        `[motd.online]\ntext = "a"\nfavicon = "${png.toString("base64")}"`,
        `[motd.sleeping]\ntext = "b"\nfavicon = "data:image/png;base64,${png.toString("base64")}"`,
        `[motd.starting]\ntext = "c"\nfavicon = "http://127.0.0.1:${port}/icon.png"`
      ].join("\n")
    )
    const snapshot = Either.getOrThrow(await load(dir.configFile)).snapshot
    const uri = `data:image/png;base64,${png.toString("base64")}`
    expect(snapshot.global.default_motd.online!.favicon).toBe(uri)
    const motd = snapshot.servers.get("a")!.config.motd
    expect([motd.online!.favicon, motd.sleeping!.favicon, motd.starting!.favicon]).toEqual([uri, uri, uri])
  })

  it("a bad favicon is a configuration error, not a crash", async () => {
    const closed = await freePort()
    const port = await serveHttp((_, res) => res.writeHead(404).end())
    const dir = makeConfigDir("", {
      "a.toml": withFavicons({
        online: "missing.png",
        offline: "big.png",
        crashed: `http://127.0.0.1:${port}/none.png`,
        stopping: "notpng.txt",
        sleeping: `http://127.0.0.1:${closed}/gone.png`
      })
    })
    writeFileSync(path.join(dir.serversDir, "big.png"), makePng(128, 128))
    writeFileSync(path.join(dir.serversDir, "notpng.txt"), "hello")
    const result = await load(dir.configFile)
    const lines = Either.isLeft(result) ? result.left.problems.map(formatProblem) : []
    expect(lines).toEqual([
      expect.stringMatching(/a\.toml: motd\.online\.favicon: cannot read favicon file .*missing\.png: no such file$/),
      expect.stringMatching(/a\.toml: motd\.offline\.favicon: favicon must be 64x64 pixels, this PNG is 128x128/),
      // The system's reason under the client's "Transport error".
      expect.stringMatching(/a\.toml: motd\.sleeping\.favicon: cannot fetch favicon http:\/\/127\.0\.0\.1:\d+\/gone\.png: Transport error .*ECONNREFUSED/),
      expect.stringMatching(/a\.toml: motd\.crashed\.favicon: cannot fetch favicon http:\/\/127\.0\.0\.1:\d+\/none\.png: HTTP 404/),
      expect.stringMatching(/a\.toml: motd\.stopping\.favicon: favicon is not a PNG image/)
    ])
  })

  it("refuses a favicon that is no regular file or too large for a server-list answer, without reading it", async () => {
    // A 64x64 PNG padded with a text chunk to 40 KB: valid, but its answer would pass the client's 32767 characters.
    const padded = Buffer.concat([makePng(), Buffer.alloc(40_000, 0x20)])
    const port = await serveHttp((request, res) => {
      if (request.url === "/endless.png") {
        // An answer that never ends: reading stops past the bound instead of holding it all.
        res.writeHead(200)
        const more = () => (res.write(Buffer.alloc(64 * 1024)) ? setImmediate(more) : res.once("drain", more))
        more()
        return
      }
      res.writeHead(200).end(padded)
    })
    const dir = makeConfigDir("", {
      "a.toml": withFavicons({
        online: "fifo.png",
        offline: "padded.png",
        crashed: `http://127.0.0.1:${port}/padded.png`,
        stopping: `http://127.0.0.1:${port}/endless.png`,
        sleeping: `data:image/png;base64,${padded.toString("base64")}`,
        starting: "icons"
      })
    })
    execFileSync("mkfifo", [path.join(dir.serversDir, "fifo.png")])
    mkdirSync(path.join(dir.serversDir, "icons"))
    writeFileSync(path.join(dir.serversDir, "padded.png"), padded)
    const result = await load(dir.configFile)
    const lines = Either.isLeft(result) ? result.left.problems.map(formatProblem) : []
    const tooLarge = `is ${padded.length} bytes, over the 20480 a server-list answer has room for`
    const overBound = "the answer is over 20480 bytes, more than a server-list answer has room for"
    expect(lines).toHaveLength(6)
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/a\.toml: motd\.online\.favicon: favicon .*fifo\.png is not a regular file$/),
        expect.stringMatching(new RegExp(`a\\.toml: motd\\.offline\\.favicon: favicon .*padded\\.png ${tooLarge}`)),
        expect.stringMatching(new RegExp(`a\\.toml: motd\\.crashed\\.favicon: cannot fetch favicon .*padded\\.png: ${overBound}`)),
        expect.stringMatching(new RegExp(`a\\.toml: motd\\.stopping\\.favicon: cannot fetch favicon .*endless\\.png: ${overBound}`)),
        expect.stringContaining(`a.toml: motd.sleeping.favicon: favicon ${tooLarge}`),
        expect.stringMatching(/a\.toml: motd\.starting\.favicon: favicon .*icons is not a regular file$/)
      ])
    )
  })
})

describe("hot reload of servers_dir", () => {
  it("applies an added, changed, broken and removed server file without a restart", async () => {
    const dir = makeConfigDir("", { "lobby.toml": `domains = ["lobby.example.com"]\naddresses = ["10.0.0.1"]` })
    const { snapshot } = await startStore(dir.configFile)
    expect(serverIds(await snapshot())).toEqual(["lobby"])

    dir.write("servers/survival.toml", `domains = ["survival.example.com"]\naddresses = ["10.0.0.2"]`)
    await waitFor(async () => (await snapshot()).servers.has("survival"), { what: "added server" })

    dir.write("servers/survival.toml", `domains = ["survival.example.com"]\naddresses = ["10.0.0.3:25570"]`)
    await waitFor(async () => (await snapshot()).servers.get("survival")?.config.addresses[0]?.port === 25570, {
      what: "changed server"
    })

    const before = (await snapshot()).revision
    dir.write("servers/survival.toml", `domains = ["survival.example.com"]\naddresses = ["10.0.0.4"]\nbroken_key = 1`)
    // Give the watcher time to see the broken file; the last good version must stay.
    await new Promise((resolve) => setTimeout(resolve, 700))
    const afterBreak = await snapshot()
    expect(afterBreak.revision).toBe(before)
    expect(afterBreak.servers.get("survival")!.config.addresses[0]).toEqual({ host: "10.0.0.3", port: 25570, weight: 1 })

    dir.write("servers/survival.toml", `domains = ["survival.example.com"]\naddresses = ["10.0.0.5"]`)
    await waitFor(async () => (await snapshot()).servers.get("survival")?.config.addresses[0]?.host === "10.0.0.5", {
      what: "repaired server"
    })

    rmSync(path.join(dir.serversDir, "survival.toml"))
    await waitFor(async () => !(await snapshot()).servers.has("survival"), { what: "removed server" })
    expect(serverIds(await snapshot())).toEqual(["lobby"])
  })

  it("a servers_dir that goes away is reported once, not at every rescan, and its return is said", async () => {
    const dir = makeConfigDir("", { "lobby.toml": `domains = ["lobby.example.com"]\naddresses = ["10.0.0.1"]` })
    const { runtime, store, lines } = await startStore(dir.configFile)
    renameSync(dir.serversDir, `${dir.serversDir}.away`)
    for (let scan = 0; scan < 3; scan += 1) await runtime.runPromise(store.rescanServers)
    expect(lines.filter((line) => /servers_dir does not exist.*keeping the servers loaded before/.test(line))).toHaveLength(1)
    expect([...(await runtime.runPromise(store.get)).servers.keys()]).toEqual(["lobby"])
    renameSync(`${dir.serversDir}.away`, dir.serversDir)
    await runtime.runPromise(store.rescanServers)
    expect(lines.filter((line) => /can be listed again/.test(line))).toHaveLength(1)
  })

  it("a broken file put back as it was is said to be fixed, though the configuration does not change", async () => {
    const good = `domains = ["lobby.example.com"]\naddresses = ["10.0.0.1"]`
    const dir = makeConfigDir("", { "lobby.toml": good })
    const { runtime, store, lines } = await startStore(dir.configFile)
    const revision = (await runtime.runPromise(store.get)).revision
    writeFileSync(path.join(dir.serversDir, "lobby.toml"), `${good}\nbroken_key = 1`)
    await runtime.runPromise(store.rescanServers)
    expect(lines.some((line) => /lobby\.toml: broken_key: unknown key/.test(line))).toBe(true)
    writeFileSync(path.join(dir.serversDir, "lobby.toml"), good)
    await runtime.runPromise(store.rescanServers)
    expect(lines.filter((line) => /lobby\.toml: its problems are fixed; the server is loaded from it/.test(line))).toHaveLength(1)
    expect((await runtime.runPromise(store.get)).revision).toBe(revision)
    // Said once: a rescan of the good file says nothing more.
    await runtime.runPromise(store.rescanServers)
    expect(lines.filter((line) => /its problems are fixed/.test(line))).toHaveLength(1)
  })

  it("a rescan that finds the same servers, written the same or differently, publishes nothing", async () => {
    const dir = makeConfigDir("", { "lobby.toml": `domains = ["lobby.example.com"]\naddresses = ["10.0.0.1"]` })
    const { snapshot } = await startStore(dir.configFile)
    const first = await snapshot()
    dir.write("servers/lobby.toml", `domains = ["lobby.example.com"]\naddresses = ["10.0.0.1"]`)
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect((await snapshot()).revision).toBe(first.revision)
    // The same server in other words (the default port written out) is the same configuration.
    dir.write("servers/lobby.toml", `domains = ["lobby.example.com"]\naddresses = ["10.0.0.1:25565"]`)
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect((await snapshot()).revision).toBe(first.revision)
    dir.write("servers/lobby.toml", `domains = ["lobby.example.com"]\naddresses = ["10.0.0.1:25566"]`)
    await waitFor(async () => (await snapshot()).servers.get("lobby")?.config.addresses[0]?.port === 25566, { what: "changed server" })
    expect((await snapshot()).revision).toBe(first.revision + 1)
  })

  it("a new file claiming a taken domain is held back until the conflict is gone", async () => {
    const dir = makeConfigDir("", { "a.toml": `domains = ["play.example.com"]\naddresses = ["10.0.0.1"]` })
    const { snapshot } = await startStore(dir.configFile)
    dir.write("servers/b.toml", `domains = ["play.example.com"]\naddresses = ["10.0.0.2"]`)
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect(serverIds(await snapshot())).toEqual(["a"])
    rmSync(path.join(dir.serversDir, "a.toml"))
    await waitFor(async () => serverIds(await snapshot()).join() === "b", { what: "held-back server applied" })
  })

  it("a file that never decoded is not loaded, and is loaded once fixed", async () => {
    const dir = makeConfigDir("")
    const { snapshot } = await startStore(dir.configFile)
    dir.write("servers/x.toml", `addresses = "oops"`)
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(serverIds(await snapshot())).toEqual([])
    dir.write("servers/x.toml", `addresses = ["10.0.0.9"]`)
    await waitFor(async () => (await snapshot()).servers.has("x"), { what: "fixed server" })
  })
})

describe("reloading proxy.toml", () => {
  it("applies live options and keeps restart-only options until a restart", async () => {
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nmax_connections = 10`)
    const { runtime, store, snapshot } = await startStore(dir.configFile)
    dir.write("proxy.toml", `bind = "127.0.0.1:1234"\nmax_connections = 20`)
    await runtime.runPromise(store.reloadGlobal)
    const after = await snapshot()
    expect(after.global.max_connections).toBe(20)
    expect(after.global.bind).toEqual({ host: "127.0.0.1", port: 0 })
  })

  it("says a restart-only option needs a restart while it differs from the running one, not once set back", async () => {
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nmax_connections = 10`)
    const { runtime, store, lines } = await startStore(dir.configFile)
    const restartLines = () => lines.filter((line) => line.includes("needs a restart"))
    dir.write("proxy.toml", `bind = "127.0.0.1:1234"\nmax_connections = 20`)
    await runtime.runPromise(store.reloadGlobal)
    dir.write("proxy.toml", `bind = "127.0.0.1:1234"\nmax_connections = 30`)
    await runtime.runPromise(store.reloadGlobal)
    expect(restartLines()).toEqual([expect.stringMatching(/bind changed/), expect.stringMatching(/bind changed/)])
    dir.write("proxy.toml", `bind = "127.0.0.1:0"\nmax_connections = 30`)
    await runtime.runPromise(store.reloadGlobal)
    expect(restartLines()).toHaveLength(2)
  })

  it("a broken proxy.toml changes nothing", async () => {
    const dir = makeConfigDir(`max_connections = 10`)
    const { runtime, store, snapshot } = await startStore(dir.configFile)
    const before = await snapshot()
    dir.write("proxy.toml", `max_connections = "many"`)
    await runtime.runPromise(store.reloadGlobal)
    expect(await snapshot()).toBe(before)
  })

  it("a loopback [web] without api_key gets an ephemeral key", async () => {
    const dir = makeConfigDir(`[web]\nbind = "127.0.0.1:0"`)
    const { snapshot } = await startStore(dir.configFile)
    const key = (await snapshot()).global.web!.api_key
    expect(key).toMatch(/^[A-Za-z0-9_-]{32}$/)
    // Without the API there is nothing a key would open: none is made, and no sign-in is offered.
    const closed = makeConfigDir(`[web]\nbind = "127.0.0.1:0"\nenable_api = false`)
    expect((await (await startStore(closed.configFile)).snapshot()).global.web!.api_key).toBeUndefined()
  })
})
