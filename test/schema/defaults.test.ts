/** Every default of the specification's tables, decoded from an empty table. */
import { Duration, Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { GlobalConfig, PORTAL_VERSION } from "../../src/schema/GlobalConfig.js"
import { ServerConfig } from "../../src/schema/ServerConfig.js"

const decodeGlobal = (input: unknown) => Schema.decodeUnknownSync(GlobalConfig, { onExcessProperty: "error" })(input)
const decodeServer = (input: unknown) => Schema.decodeUnknownSync(ServerConfig, { onExcessProperty: "error" })(input)
const seconds = (d: Duration.Duration) => Duration.toMillis(d) / 1000

describe("global file defaults", () => {
  const config = decodeGlobal({})

  it("top-level options", () => {
    expect(config.bind).toEqual({ host: "0.0.0.0", port: 25565 })
    expect(config.max_connections).toBe(0)
    expect(seconds(config.connect_timeout)).toBe(5)
    expect(config.connect_max_attempts).toBe(3)
    expect(config.receive_proxy_protocol).toBe(false)
    expect(config.servers_dir).toBe("./servers")
    expect(config.plugins_dir).toBe("./plugins")
    expect(config.worker_threads).toBe(0)
    expect(config.so_reuseport).toBe(false)
    expect(config.unknown_domain_behavior).toBe("default_motd")
    expect(config.announce_proxy_commands).toBe(true)
  })

  it("[rate_limit]", () => {
    const t = config.rate_limit
    expect([t.enabled, t.max_connections, seconds(t.window), t.status_max, seconds(t.status_window)]).toEqual([false, 3, 10, 300, 10])
  })

  it("[status_cache]", () => {
    expect(seconds(config.status_cache.ttl)).toBe(5)
    expect(config.status_cache.max_entries).toBe(1000)
  })

  it("[keepalive]", () => {
    expect([seconds(config.keepalive.time), seconds(config.keepalive.interval), config.keepalive.retries]).toEqual([30, 10, 3])
  })

  it("[ban]", () => {
    expect(config.ban.file).toBe("bans.json")
    expect(seconds(config.ban.purge_interval)).toBe(300)
    expect(config.ban.enable_audit_log).toBe(true)
  })

  it("optional tables are absent until written", () => {
    expect(config.containers).toBeUndefined()
    expect(config.telemetry).toBeUndefined()
    expect(config.web).toBeUndefined()
    expect(config.default_motd).toEqual({})
    expect(config.plugins).toEqual({})
  })

  it("[containers]", () => {
    const t = decodeGlobal({ containers: {} }).containers!
    expect(t.endpoint).toBe("unix:///var/run/docker.sock")
    expect(t.network).toBeUndefined()
    expect(seconds(t.poll_interval)).toBe(30)
    expect(seconds(t.reconnect_delay)).toBe(5)
  })

  it("[telemetry] and its sub-tables", () => {
    const t = decodeGlobal({ telemetry: {} }).telemetry!
    expect(t.enabled).toBe(false)
    expect(t.endpoint).toBeUndefined()
    expect(t.protocol).toBe("grpc")
    expect(t.metrics.enabled).toBe(true)
    expect(seconds(t.metrics.export_interval)).toBe(15)
    expect(t.traces.enabled).toBe(true)
    expect(t.traces.sampling_ratio).toBe(0.1)
    expect(t.resource.service_name).toBe("proxy")
    expect(t.resource.service_version).toBe(PORTAL_VERSION)
  })

  it("[ip_filter]", () => {
    expect(config.ip_filter).toEqual({ whitelist: [], blacklist: [] })
  })

  it("[forwarding] with channel_permissions", () => {
    const t = config.forwarding
    expect(t.mode).toBe("none")
    expect(t.secret_file).toBe("forwarding.secret")
    expect(t.legacy_channel).toBe(true)
    for (const off of ["ConnectOther", "Message", "MessageRaw", "KickPlayer", "KickPlayerRaw"] as const) {
      expect(t.channel_permissions[off]).toBe(false)
    }
    for (const on of ["Connect", "IP", "PlayerCount"] as const) expect(t.channel_permissions[on]).toBe(true)
  })

  it("[web] with rate_limit", () => {
    const t = decodeGlobal({ web: {} }).web!
    expect(t.enable_api).toBe(true)
    expect(t.enable_webui).toBeUndefined() // follows enable_api
    expect(t.bind).toEqual({ host: "127.0.0.1", port: 8080 })
    expect(t.api_key).toBeUndefined()
    expect(t.cors_origins).toEqual([])
    expect(t.rate_limit.requests_per_minute).toBe(60)
  })

  it("[permissions]", () => {
    expect(config.permissions).toEqual({ admins: [], player_commands: [] })
  })

  it("[plugins.<id>]", () => {
    const plugin = decodeGlobal({ plugins: { motd_rotator: {} } }).plugins["motd_rotator"]!
    expect(plugin.path).toBeUndefined()
    expect(plugin.permissions).toEqual([])
    expect(plugin.enabled).toBeUndefined()
  })

  it("[active_health]", () => {
    const t = config.active_health
    expect(t.enabled).toBe(false)
    expect(t.kind).toBe("tcp")
    expect(seconds(t.interval)).toBe(10)
    expect(seconds(t.unhealthy_interval)).toBe(5)
    expect(seconds(t.timeout)).toBe(2)
    expect(t.max_concurrent).toBe(16)
  })
})

describe("server file defaults", () => {
  const server = decodeServer({ domains: ["play.example.com"], addresses: ["10.0.0.1"] })

  it("top-level options", () => {
    expect(server.id).toBeUndefined()
    expect(server.name).toBeUndefined()
    expect(server.network).toBeUndefined()
    expect(server.addresses).toEqual([{ host: "10.0.0.1", port: 25565, weight: 1 }])
    expect(server.balance).toBe("first_available")
    expect(server.slow_start).toBeUndefined()
    expect(server.slow_start_aggression).toBe(1.0)
    expect(server.active_health).toBeUndefined()
    expect(server.proxy_mode).toBe("passthrough")
    expect(server.forwarding_mode).toBeUndefined()
    expect(server.send_proxy_protocol).toBe(false)
    expect(server.domain_rewrite).toBe("none")
    expect(server.max_players).toBe(0)
    expect(server.disconnect_message).toBe("Server is currently unreachable. Please try again later.")
    expect(server.limbo_handlers).toEqual([])
    expect(server.motd).toEqual({})
    expect(server.server_manager).toBeUndefined()
  })

  it("domains default to none (reachable only by switching)", () => {
    expect(decodeServer({ addresses: ["a:1"] }).domains).toEqual([])
  })

  it("[timeouts]: connect inherits connect_timeout, read and write 30s", () => {
    expect(server.timeouts.connect).toBeUndefined()
    expect(seconds(server.timeouts.read)).toBe(30)
    expect(seconds(server.timeouts.write)).toBe(30)
  })

  it("[ip_filter]", () => {
    expect(server.ip_filter).toEqual({ whitelist: [], blacklist: [] })
  })

  it("[motd.<state>] entries need only text", () => {
    const motd = decodeServer({ addresses: ["a"], motd: { sleeping: { text: "zzz" } } }).motd
    expect(motd.sleeping).toEqual({ text: "zzz" })
  })

  it("[server_manager] local", () => {
    const m = decodeServer({ addresses: ["a"], server_manager: { type: "local", command: "java", working_dir: "." } }).server_manager!
    expect(m.type).toBe("local")
    if (m.type !== "local") return
    expect(m.args).toEqual([])
    expect(m.ready_pattern).toBe('For help, type "help"')
    expect(seconds(m.shutdown_timeout)).toBe(30)
    expect(m.shutdown_after).toBeUndefined()
    expect(seconds(m.start_timeout)).toBe(60)
  })

  it.each(["panel", "controller"] as const)("[server_manager] %s", (type) => {
    const m = decodeServer({
      addresses: ["a"],
      server_manager: { type, api_url: "https://panel.example.com", api_key: "k", server_id: "abc" }
    }).server_manager!
    expect(m.type).toBe(type)
    if (m.type === "local") return
    expect(m.shutdown_after).toBeUndefined()
    expect(seconds(m.start_timeout)).toBe(60)
    expect(seconds(m.poll_interval)).toBe(5)
  })
})

describe("value shapes", () => {
  it("addresses: strings, tables with weight, IPv6 in brackets, default port", () => {
    const server = decodeServer({
      addresses: ["mc.example.com", "10.0.0.2:25570", "[2001:db8::1]:25580", "[::1]", { address: "10.0.0.3", weight: 5 }]
    })
    expect(server.addresses).toEqual([
      { host: "mc.example.com", port: 25565, weight: 1 },
      { host: "10.0.0.2", port: 25570, weight: 1 },
      { host: "2001:db8::1", port: 25580, weight: 1 },
      { host: "::1", port: 25565, weight: 1 },
      { host: "10.0.0.3", port: 25565, weight: 5 }
    ])
  })

  it("domain_rewrite takes none, from_backend or { explicit }", () => {
    expect(decodeServer({ addresses: ["a"], domain_rewrite: "from_backend" }).domain_rewrite).toBe("from_backend")
    expect(decodeServer({ addresses: ["a"], domain_rewrite: { explicit: "Backend.Example.com" } }).domain_rewrite).toEqual({
      explicit: "backend.example.com"
    })
  })

  it("domains are lower-cased and lose a trailing dot; wildcards stay", () => {
    expect(decodeServer({ addresses: ["a"], domains: ["Play.Example.COM.", "*.Example.com"] }).domains).toEqual([
      "play.example.com",
      "*.example.com"
    ])
  })

  it("durations accept every unit and combinations", () => {
    const d = (text: string) => Duration.toMillis(decodeGlobal({ connect_timeout: text }).connect_timeout)
    expect(d("500ms")).toBe(500)
    expect(d("5s")).toBe(5000)
    expect(d("10m")).toBe(600_000)
    expect(d("1h30m")).toBe(5_400_000)
    expect(d("7d")).toBe(604_800_000)
    expect(d("1.5s")).toBe(1500)
  })

  it("an explicit enable_webui is kept", () => {
    const web = Schema.decodeUnknownEither(GlobalConfig)({ web: { enable_webui: false } })
    expect(Either.getOrThrow(web).web!.enable_webui).toBe(false)
  })
})
