/** The command line, run as a real child process against real files. */
import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { type AddressInfo, createServer } from "node:net"
import { availableParallelism } from "node:os"
import { describe, expect, it } from "vitest"
import { PORTAL_VERSION } from "../src/schema/GlobalConfig.js"
import { keepaliveSupport } from "../src/services/native/keepalive.js"
import { MAIN, nodeFlagsOf, runPortal, startPortal } from "./helpers/process.js"
import { makeConfigDir } from "./helpers/tempdir.js"
import { join, startBackend } from "./peers/minecraft.js"

describe("--check", () => {
  it("accepts the example configuration and prints a one-line summary", () => {
    const result = runPortal(["--check"])
    expect(result.stderr).toBe("")
    expect(result.stdout.split("\n")[0]).toBe(
      "proxy.toml is valid: 2 servers (lobby, survival), 5 domains, bind 0.0.0.0:25565"
    )
    expect(result.status).toBe(0)
  })

  it("refuses a PORTAL_SESSION_SERVER that is no http(s) base URL, saying why, and accepts one that is", () => {
    for (const [value, why] of [
      ["not a url", /not a URL/],
      ["ftp://127.0.0.1/", /ftp is not http or https/],
      ["http://127.0.0.1:8080/?x=1", /takes no query or fragment/]
    ] as const) {
      const result = runPortal(["--check"], { env: { PORTAL_SESSION_SERVER: value } })
      expect(result.status).toBe(1)
      expect(result.stderr).toContain(`PORTAL_SESSION_SERVER=${JSON.stringify(value)}`)
      expect(result.stderr).toMatch(why)
    }
    const good = runPortal(["--check"], { env: { PORTAL_SESSION_SERVER: "http://127.0.0.1:8080/prefix/" } })
    expect(good.stderr).toBe("")
    expect(good.status).toBe(0)
  })

  it("prints each problem with file, key path and reason, and exits 1", () => {
    const dir = makeConfigDir(`bind = "0.0.0.0:25565"\n[rate_limit]\nwindw = "10s"`)
    const first = runPortal(["--check", "--config", dir.configFile])
    expect(first.status).toBe(1)
    expect(first.stderr).toMatch(/proxy\.toml: rate_limit\.windw: unknown key \(did you mean "window"\?\)/)

    dir.write("proxy.toml", "")
    dir.write("servers/lobby.toml", `domains = ["lobby.example.com"]\naddresses = ["10.0.0.1"]\nname = "Lobby"`)
    dir.write("servers/hub.toml", `domains = ["hub.example.com"]\naddresses = ["10.0.0.1:99999"]`)
    const second = runPortal(["--check", "--config", dir.configFile])
    expect(second.status).toBe(1)
    const lines = second.stderr.trim().split("\n")
    expect(lines).toEqual([
      expect.stringMatching(/servers\/hub\.toml: addresses\[0\]: port 99999 is out of range 1\.\.65535$/),
      expect.stringMatching(/servers\/lobby\.toml: name: "Lobby" must match \[a-z0-9_-\]\+/),
      "2 problem(s) found"
    ])
  })

  it("prints every problem of every file in one pass: a broken proxy.toml, several broken server files, and clashes", () => {
    const dir = makeConfigDir(
      [`bind = "0.0.0.0:25565"`, `max_connections = "many"`, `conect_timeout = "5s"`, `[status_cache]`, `ttl = "5 parsecs"`].join("\n"),
      {
        "alpha.toml": [
          `domains = ["play.example.com", "bad domain"]`,
          `addresses = ["10.0.0.1"]`,
          `proxy_mod = "zero_copy"`,
          `max_players = "ten"`,
          `[timeouts]`,
          `read = "soon"`,
          `[motd.online]`,
          `txet = "hi"`
        ].join("\n"),
        "beta.toml": [
          `name = "alpha"`,
          `domains = ["beta.example.com"]`,
          `addresses = ["10.0.0.2:99999"]`,
          `balance = "round_robbin"`,
          `slow_start = 10`
        ].join("\n"),
        "gamma.toml": [`domains = ["PLAY.example.com"]`, `addresses = ["10.0.0.3"]`, `send_proxy_protocl = true`].join("\n"),
        "delta.toml": `domains = ["delta.example.com"\naddresses = []`
      }
    )
    const result = runPortal(["--check", "--config", dir.configFile])
    expect(result.status).toBe(1)
    expect(result.stdout).toBe("")
    expect(result.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/proxy\.toml: conect_timeout: unknown key \(did you mean "connect_timeout"\?\); allowed keys: /),
      expect.stringMatching(/proxy\.toml: max_connections: expected a number, got "many"$/),
      expect.stringMatching(/proxy\.toml: status_cache\.ttl: expected a duration such as "500ms", "5s", "1h30m" or "7d", got "5 parsecs"$/),
      expect.stringMatching(/servers\/alpha\.toml: proxy_mod: unknown key \(did you mean "proxy_mode"\?\)/),
      expect.stringMatching(/servers\/alpha\.toml: domains\[1\]: "bad domain" is not a domain/),
      expect.stringMatching(/servers\/alpha\.toml: max_players: expected a number, got "ten"$/),
      expect.stringMatching(/servers\/alpha\.toml: motd\.online\.txet: unknown key \(did you mean "text"\?\)/),
      expect.stringMatching(/servers\/alpha\.toml: motd\.online\.text: is required$/),
      expect.stringMatching(/servers\/alpha\.toml: timeouts\.read: expected a duration such as .*, got "soon"$/),
      expect.stringMatching(/servers\/beta\.toml: addresses\[0\]: port 99999 is out of range 1\.\.65535$/),
      expect.stringMatching(/servers\/beta\.toml: balance: expected one of .*, got "round_robbin" \(did you mean "round_robin"\?\)$/),
      expect.stringMatching(/servers\/beta\.toml: slow_start: expected a duration such as "500ms", "5s", "1h30m" or "7d", got 10$/),
      expect.stringMatching(/servers\/delta\.toml:2:\d+: TOML syntax error/),
      expect.stringMatching(/servers\/gamma\.toml: send_proxy_protocl: unknown key \(did you mean "send_proxy_protocol"\?\)/),
      // The rules across files see what decodes of the broken files.
      expect.stringMatching(/servers\/beta\.toml: name: server id "alpha" is already used by .*servers\/alpha\.toml$/),
      expect.stringMatching(/servers\/gamma\.toml: domains: domain "play\.example\.com" is already routed to server "alpha" \(.*servers\/alpha\.toml\)$/),
      "16 problem(s) found"
    ])
  })

  it("says when proxy.toml hides servers_dir, and otherwise checks the server files anyway", () => {
    const dir = makeConfigDir(`servers_dir = 5`, { "a.toml": `addresses = ["10.0.0.1"]\nbogus = 1` })
    const hidden = runPortal(["--check", "--config", dir.configFile])
    expect(hidden.status).toBe(1)
    expect(hidden.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/proxy\.toml: servers_dir: expected a string, got 5$/),
      expect.stringMatching(/^note: the server files were not checked: servers_dir has a problem in .*proxy\.toml$/),
      "1 problem(s) found"
    ])

    // A syntax error after servers_dir: the lines before it still say where the server files are.
    dir.write("proxy.toml", `servers_dir = "servers"\nmax_connections = = 3`)
    const before = runPortal(["--check", "--config", dir.configFile])
    expect(before.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/proxy\.toml:2:\d+: TOML syntax error/),
      expect.stringMatching(/servers\/a\.toml: bogus: unknown key/),
      "2 problem(s) found"
    ])

    // A syntax error in a file that does not set servers_dir: the default applies, and the output says so.
    dir.write("proxy.toml", `max_connections = = 3`)
    const fallback = runPortal(["--check", "--config", dir.configFile])
    expect(fallback.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/proxy\.toml:1:\d+: TOML syntax error/),
      expect.stringMatching(/servers\/a\.toml: bogus: unknown key/),
      expect.stringMatching(/^note: .*proxy\.toml has a syntax error and does not set servers_dir; the server files were checked in the default servers_dir .*servers$/),
      "2 problem(s) found"
    ])

    // servers_dir written after the syntax error cannot be read: the server files are not guessed at.
    dir.write("proxy.toml", `max_connections = = 3\nservers_dir = "elsewhere"`)
    const unknown = runPortal(["--check", "--config", dir.configFile])
    expect(unknown.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/proxy\.toml:1:\d+: TOML syntax error/),
      expect.stringMatching(/^note: the server files were not checked: servers_dir cannot be read past the syntax error in .*proxy\.toml$/),
      "1 problem(s) found"
    ])
  })

  it("reports a missing configuration file, or a directory in its place, in words", () => {
    const result = runPortal(["--check", "--config", "/nonexistent/proxy.toml"])
    expect(result.status).toBe(1)
    expect(result.stderr).toMatch(/\/nonexistent\/proxy\.toml: cannot read: no such file$/m)
    const dir = makeConfigDir("")
    const directory = runPortal(["--check", "--config", dir.serversDir])
    expect(directory.status).toBe(1)
    expect(directory.stderr).toMatch(/servers: cannot read: it is a directory, not a file$/m)
  })

  it("notes configured features that are not active yet", () => {
    const dir = makeConfigDir(`worker_threads = 1\n[telemetry]\nenabled = true`)
    const result = runPortal(["--check", "--config", dir.configFile])
    expect(result.status).toBe(0)
    expect(result.stdout).toMatch(/note: configured but not active yet: \[telemetry\.traces\]: there is no endpoint: traces are not recorded/)
    expect(result.stdout).toMatch(/\[telemetry\.metrics\]: there is no endpoint and no admin API: metrics go nowhere/)
    // With an endpoint telemetry is active: nothing to note.
    const exported = makeConfigDir(`worker_threads = 1\n[telemetry]\nenabled = true\nendpoint = "http://127.0.0.1:4318"`)
    expect(runPortal(["--check", "--config", exported.configFile]).stdout).not.toMatch(/telemetry/)
  })

  it("warns about a client_only server without forwarding, and modern forwarding on a raw mode", () => {
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, {
      "auth.toml": `domains = ["a.example.com"]\naddresses = ["127.0.0.1:25566"]\nproxy_mode = "client_only"`,
      "fwd.toml": `domains = ["b.example.com"]\naddresses = ["127.0.0.1:25567"]\nproxy_mode = "client_only"\nforwarding_mode = "legacy"`,
      "raw.toml": `domains = ["c.example.com"]\naddresses = ["127.0.0.1:25568"]\nforwarding_mode = "modern"`
    })
    const result = runPortal(["--check", "--config", dir.configFile])
    expect(result.status).toBe(0)
    expect(result.stdout).toMatch(/warning: .*auth\.toml: proxy_mode: client_only authenticates players, but the server has no forwarding/)
    expect(result.stdout).not.toMatch(/fwd\.toml: proxy_mode/)
    expect(result.stdout).toMatch(/warning: .*raw\.toml: forwarding_mode: modern forwarding needs a packet proxy mode/)
    expect(result.stdout).not.toMatch(/client_only.*not active yet/)
  })

  it("warns about more worker threads than cores", () => {
    const many = availableParallelism() + 2
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = ${many}`)
    const result = runPortal(["--check", "--config", dir.configFile])
    expect(result.status).toBe(0)
    expect(result.stdout).toMatch(new RegExp(`warning: worker_threads: asks for ${many} workers on ${availableParallelism()} core\\(s\\)`))
    const fitting = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = ${availableParallelism()}`)
    expect(runPortal(["--check", "--config", fitting.configFile]).stdout).not.toMatch(/worker_threads/)
  })

  it("warns of keepalive values over the kernel's limits, which are set at the limits", () => {
    const dir = makeConfigDir(`[keepalive]\nretries = 200`)
    const result = runPortal(["--check", "--config", dir.configFile])
    expect(result.status).toBe(0)
    expect(result.stdout).toMatch(
      keepaliveSupport().full
        ? /warning: \[keepalive\]: Linux allows at most 127 retries and 32767s for time and interval: larger values are set at those limits/
        : /\[keepalive\]: interval and retries \(set or default\) need the native addon/
    )
    const within = runPortal(["--check", "--config", makeConfigDir(`[keepalive]\nretries = 127\ntime = "9h"`).configFile])
    expect(within.stdout).not.toMatch(/\[keepalive\]: Linux allows/)
  })
})

describe("running", () => {
  it("a broken configuration makes the process exit 1 with the same messages", async () => {
    const dir = makeConfigDir(`max_connections = "lots"`)
    const result = runPortal(["--config", dir.configFile])
    expect(result.status).toBe(1)
    expect(result.stderr).toMatch(/proxy\.toml: max_connections: expected a number, got "lots"/)
    // Startup reports as --check does: every problem, and what could not be checked.
    dir.write("proxy.toml", `servers_dir = 5\nmax_connections = "lots"`)
    const hidden = runPortal(["--config", dir.configFile])
    expect(hidden.status).toBe(1)
    expect(hidden.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/proxy\.toml: max_connections: expected a number, got "lots"$/),
      expect.stringMatching(/proxy\.toml: servers_dir: expected a string, got 5$/),
      expect.stringMatching(/^note: the server files were not checked: servers_dir has a problem in .*proxy\.toml$/),
      "portal: the configuration has 2 problem(s); not starting"
    ])
  })

  it("a web bind that is taken stops the start with the reason, as the game bind does", async () => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
    const port = (taken.address() as AddressInfo).port
    try {
      const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[web]\nbind = "127.0.0.1:${port}"\napi_key = "a-long-enough-key-for-the-api"`)
      const result = runPortal(["--config", dir.configFile])
      expect(result.status).toBe(1)
      expect(result.stdout + result.stderr).toMatch(new RegExp(`Portal cannot run: cannot listen on 127\\.0\\.0\\.1:${port} \\(web\\): the address is already in use`))
    } finally {
      taken.close()
    }
  })

  it("starts, logs what it loaded, and shuts down gracefully on SIGTERM and SIGINT", async () => {
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      const dir = makeConfigDir(`bind = "127.0.0.1:0"`, { "a.toml": `domains = ["a.example.com"]\naddresses = ["127.0.0.1:1"]` })
      const portal = startPortal(["--config", dir.configFile])
      await portal.waitForOutput(/proxy\.toml loaded: 1 server \(a\)/)
      expect(await portal.stop(signal)).toBe(0)
    }
  })

  it("a second SIGINT during the graceful shutdown stops at once, with exit code 130, and says so", async () => {
    const backend = await startBackend("held", { hold: true })
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, { "a.toml": `domains = ["a.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]` })
    const portal = startPortal(["--config", dir.configFile], { env: { PORTAL_SHUTDOWN_GRACE_MS: "20000" } })
    const listening = await portal.waitForOutput(/listening on 127\.0\.0\.1:(\d+)/)
    const player = await join(Number(listening[1]), "a.example.com", { username: "Steve" })
    expect(player._tag).toBe("Joined")
    portal.child.kill("SIGINT")
    await portal.waitForOutput(/shutting down: waiting up to 20s for 1 connection/)
    portal.child.kill("SIGINT")
    expect(await portal.exited()).toBe(130)
    expect(portal.output()).toMatch(/portal: SIGINT again during the shutdown: stopping now, without waiting for the players/)
  })

  it("keeps serving when its standard output goes away (EPIPE), and says so on standard error", async () => {
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`)
    const portal = startPortal(["--config", dir.configFile])
    await portal.waitForOutput(/loaded/)
    portal.child.stdout!.destroy()
    // Each reload logs lines into the closed pipe.
    for (let i = 0; i < 3; i++) {
      portal.child.kill("SIGHUP")
      await new Promise((resolve) => setTimeout(resolve, 300))
    }
    await portal.waitForOutput(/standard output failed \(EPIPE\); log lines are dropped from now on/)
    expect(portal.child.exitCode).toBeNull()
    expect(await portal.stop("SIGTERM")).toBe(0)
  })

  it("JSON logs are one object per line", async () => {
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`)
    const portal = startPortal(["--config", dir.configFile, "--log-format", "json"])
    await portal.waitForOutput(/loaded/)
    const first = JSON.parse(portal.output().split("\n")[0]!)
    expect(first).toMatchObject({ level: "info", message: expect.stringMatching(/proxy\.toml loaded: 0 servers/) })
     // A configuration that cannot start says so in JSON too: one record per problem, then the verdict.
    const broken = makeConfigDir(`max_connections = "lots"\nconnect_timeout = "0s"`)
    const result = runPortal(["--config", broken.configFile, "--log-format", "json"])
    expect(result.status).toBe(1)
    const records = result.stdout.trim().split("\n").map((line) => JSON.parse(line))
    expect(records.map((record) => [record.level, record.message])).toEqual([
      ["error", expect.stringMatching(/proxy\.toml: max_connections: expected a number, got "lots"$/)],
      ["error", expect.stringMatching(/proxy\.toml: connect_timeout: expected a duration above zero$/)],
      ["fatal", "the configuration has 2 problem(s); not starting"]
    ])
  })

  it("SIGHUP re-reads proxy.toml and names options that need a restart", async () => {
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`)
    const portal = startPortal(["--config", dir.configFile])
    await portal.waitForOutput(/loaded/)
    dir.write("proxy.toml", `bind = "127.0.0.1:1"\nmax_connections = 5`)
    portal.child.kill("SIGHUP")
    await portal.waitForOutput(/proxy\.toml: bind changed and needs a restart to take effect/)
    await portal.waitForOutput(/reloaded .*proxy\.toml/)
  })
})

describe("flags", () => {
  it("--help, --version and a bad flag", () => {
    const help = runPortal(["--help"])
    expect(help.status).toBe(0)
    expect(help.stdout).toMatch(/--config PATH/)
    expect(help.stdout).toMatch(/--check/)
    const version = runPortal(["--version"])
    expect(version.stdout.trim()).toBe(PORTAL_VERSION)
    const bad = runPortal(["--no-such-flag"])
    expect(bad.status).toBe(2)
    expect(bad.stderr).toMatch(/Unknown option '--no-such-flag'/)
    const level = runPortal(["--log-level", "loud"])
    expect(level.status).toBe(2)
    expect(level.stderr).toMatch(/--log-level must be one of/)
  })
})

describe("launchers", () => {
  it("the portal command's first line and npm start run Node with the same flags, and Node accepts them", () => {
    const flags = nodeFlagsOf(MAIN)
    expect(flags).toContain("--single-threaded-gc")
    expect(flags).toContain("--no-allocation-site-pretenuring")
    expect(flags).toContain("--max-semi-space-size=2")
    expect(flags).toContain("--heap-growing-percent=30")
    const scripts = (JSON.parse(readFileSync("package.json", "utf8")) as { scripts: Record<string, string> }).scripts
    for (const name of ["start", "dev"]) expect(scripts[name]).toContain(`node ${flags.join(" ")} dist/main.js`)
    // The build makes the file executable: the kernel runs its first line.
    const run = spawnSync(MAIN, ["--version"], { encoding: "utf8" })
    expect(run.error).toBeUndefined()
    expect(run.stderr).toBe("")
    expect(run.stdout.trim()).toBe(PORTAL_VERSION)
  })
})
