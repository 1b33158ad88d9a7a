/** Every error row: strict keys, syntax, ranges, shapes and the rules that span keys or files. */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import {
  checkGlobalText,
  checkServerText,
  decodeGlobalText,
  decodeServerText,
  findServerConflicts,
  type ServerDefinition
} from "../../src/schema/decode.js"
import { formatProblem } from "../../src/schema/problems.js"

const globalProblems = (text: string): Array<string> =>
  Either.match(decodeGlobalText("proxy.toml", text), { onLeft: (ps) => ps.map(formatProblem), onRight: () => [] })

const serverProblems = (text: string, fileName = "lobby.toml"): Array<string> =>
  Either.match(decodeServerText(`servers/${fileName}`, fileName, text), { onLeft: (ps) => ps.map(formatProblem), onRight: () => [] })

const server = (body: string) => `domains = ["play.example.com"]\naddresses = ["127.0.0.1:25566"]\n${body}`

describe("strict keys", () => {
  it("an unknown top-level key names file, key, allowed keys and a suggestion", () => {
    const [problem, ...rest] = globalProblems(`bnid = "0.0.0.0:25565"`)
    expect(rest).toEqual([])
    expect(problem).toMatch(/^proxy\.toml: bnid: unknown key \(did you mean "bind"\?\); allowed keys: bind, max_connections, /)
  })

  it("a misspelled key in a nested table gives the full key path", () => {
    expect(globalProblems(`[telemetry.traces]\nsampling_ratoi = 0.5`)).toEqual([
      'proxy.toml: telemetry.traces.sampling_ratoi: unknown key (did you mean "sampling_ratio"?); allowed keys: enabled, sampling_ratio'
    ])
    expect(serverProblems(server(`[motd.online]\ntxet = "hi"`))).toEqual([
      'servers/lobby.toml: motd.online.txet: unknown key (did you mean "text"?); allowed keys: text, favicon, version_name, max_players',
      "servers/lobby.toml: motd.online.text: is required"
    ])
  })

  it("an unknown key far from any allowed one gets no suggestion", () => {
    expect(globalProblems(`[rate_limit]\nbananas = 1`)[0]).toMatch(/rate_limit\.bananas: unknown key; allowed keys: enabled,/)
  })

  it("unknown keys are errors in every table", () => {
    const tables = [
      "rate_limit", "status_cache", "keepalive", "ban", "default_motd", "containers", "telemetry", "telemetry.metrics",
      "telemetry.traces", "telemetry.resource", "ip_filter", "forwarding", "forwarding.channel_permissions", "web",
      "web.rate_limit", "permissions", "plugins.example", "active_health", "default_motd.online"
    ]
    for (const table of tables) {
      const body = table === "default_motd.online" ? `text = "x"\nzzz_unknown = 1` : `zzz_unknown = 1`
      expect(globalProblems(`[${table}]\n${body}`).some((p) => p.includes(`${table}.zzz_unknown: unknown key`)), table).toBe(true)
    }
    for (const table of ["timeouts", "ip_filter", "motd", "active_health"]) {
      expect(serverProblems(server(`[${table}]\nzzz_unknown = 1`)).some((p) => p.includes(`${table}.zzz_unknown: unknown key`)), table).toBe(true)
    }
    expect(serverProblems(server(`[server_manager]\ntype = "local"\ncommand = "java"\nworking_dir = "."\nzzz_unknown = 1`))).toEqual([
      expect.stringContaining("server_manager.zzz_unknown: unknown key; allowed keys: type, command, working_dir, args,")
    ])
    expect(serverProblems(`addresses = [{ address = "a:1", wieght = 2 }]`)).toEqual([
      'servers/lobby.toml: addresses[0].wieght: unknown key (did you mean "weight"?); allowed keys: address, weight'
    ])
  })
})

describe("TOML syntax", () => {
  it("names file, line and column", () => {
    const [problem] = globalProblems(`bind = "0.0.0.0:25565"\nmax_connections = = 3\n`)
    expect(problem).toMatch(/^proxy\.toml:2:\d+: TOML syntax error/)
    expect(serverProblems(`domains = ["a.com"\naddresses = []`)[0]).toMatch(/^servers\/lobby\.toml:\d+:\d+: TOML syntax error/)
  })
})

describe("[web] rules", () => {
  it("enable_webui = true with enable_api = false", () => {
    expect(globalProblems(`[web]\nenable_api = false\nenable_webui = true`)).toEqual([
      "proxy.toml: web.enable_webui: the web UI needs the API: enable_webui = true requires enable_api = true"
    ])
  })

  it("api_key shorter than 16 characters is refused on any bind", () => {
    expect(globalProblems(`[web]\napi_key = "short-key"`)).toEqual([
      "proxy.toml: web.api_key: must be at least 16 characters long (got 9)"
    ])
    expect(globalProblems(`[web]\nbind = "0.0.0.0:8080"\napi_key = "0123456789abcde"`)[0]).toMatch(/at least 16 characters/)
    expect(globalProblems(`[web]\napi_key = "0123456789abcdef"`)).toEqual([])
  })

  it("a non-loopback bind without a key or with CHANGE-ME refuses to start", () => {
    expect(globalProblems(`[web]\nbind = "0.0.0.0:8080"`)).toEqual([
      expect.stringMatching(/^proxy\.toml: web\.api_key: is required because web\.bind 0\.0\.0\.0 is reachable from outside/)
    ])
    expect(globalProblems(`[web]\nbind = "[::]:8080"\napi_key = "CHANGE-ME"`)).toEqual([
      expect.stringMatching(/web\.api_key: is still the placeholder "CHANGE-ME"/)
    ])
  })

  it("a loopback bind without a key is accepted (an ephemeral key is generated at startup)", () => {
    expect(globalProblems(`[web]\nbind = "127.0.0.1:8080"`)).toEqual([])
    expect(globalProblems(`[web]\nbind = "[::1]:8080"`)).toEqual([])
  })
  it("cors_origins holds origins as browsers send them: near misses are refused, the rest written in one form", () => {
    const origins = (list: string) =>
      Either.match(decodeGlobalText("proxy.toml", `[web]\ncors_origins = ${list}`), { onLeft: () => undefined, onRight: (c) => c.web?.cors_origins })
    expect(origins(`["https://Admin.Example.com", "https://a.example.com:443", "http://127.0.0.1:3000/"]`)).toEqual([
      "https://admin.example.com",
      "https://a.example.com",
      "http://127.0.0.1:3000"
    ])
    expect(globalProblems(`[web]\ncors_origins = ["*", "admin.example.com", "https://a.example.com/ui", "ftp://a.example.com"]`)).toEqual([
      'proxy.toml: web.cors_origins[0]: "*" is not accepted: list each origin allowed; expected an origin such as "https://admin.example.com" or "http://127.0.0.1:3000"',
      'proxy.toml: web.cors_origins[1]: "admin.example.com" is not an origin; expected an origin such as "https://admin.example.com" or "http://127.0.0.1:3000"',
      'proxy.toml: web.cors_origins[2]: "https://a.example.com/ui" has a path, query or fragment; expected an origin such as "https://admin.example.com" or "http://127.0.0.1:3000"',
      'proxy.toml: web.cors_origins[3]: "ftp://a.example.com" has scheme "ftp"; expected an origin such as "https://admin.example.com" or "http://127.0.0.1:3000"'
    ])
  })
})

describe("values", () => {
  it("an address written twice in one server is refused, whatever the port's spelling", () => {
    expect(serverProblems(`domains = ["play.example.com"]\naddresses = ["10.0.0.5", "10.0.0.6:25565", { address = "10.0.0.5:25565", weight = 3 }]`)).toEqual([
      "servers/lobby.toml: addresses[2]: 10.0.0.5:25565 is listed twice; give one entry a weight instead"
    ])
    expect(serverProblems(`domains = ["play.example.com"]\naddresses = ["10.0.0.5:25565", "10.0.0.5:25566"]`)).toEqual([])
  })

  it("limbo_handlers names plugin ids, which match [a-z0-9_-]+ as the [plugins.<id>] keys do", () => {
    expect(serverProblems(server(`limbo_handlers = ["auth-queue", "lobby_2"]`))).toEqual([])
    expect(serverProblems(server(`limbo_handlers = ["Auth Queue"]`))).toEqual([
      'servers/lobby.toml: limbo_handlers[0]: "Auth Queue" is not a plugin id: plugin ids must match [a-z0-9_-]+'
    ])
  })

  it("[permissions] admins are player names or UUIDs", () => {
    expect(
      globalProblems(`[permissions]\nadmins = ["Notch", "069a79f4-44e9-4726-a5be-fca90e38aaf5", "069a79f444e94726a5befca90e38aaf5"]`)
    ).toEqual([])
    expect(globalProblems(`[permissions]\nadmins = ["Steve Jobs", "a-name-far-too-long-for-minecraft"]`)).toEqual([
      'proxy.toml: permissions.admins[0]: "Steve Jobs" is neither a player name (1 to 16 characters, no spaces) nor a UUID (32 hex digits, with or without dashes)',
      'proxy.toml: permissions.admins[1]: "a-name-far-too-long-for-minecraft" is neither a player name (1 to 16 characters, no spaces) nor a UUID (32 hex digits, with or without dashes)'
    ])
  })

  it("name must match [a-z0-9_-]+", () => {
    expect(serverProblems(server(`name = "Lobby One"`))).toEqual([
      'servers/lobby.toml: name: "Lobby One" must match [a-z0-9_-]+ (lower-case letters, digits, "_" and "-")'
    ])
    expect(serverProblems(server(`name = "lobby-1_a"`))).toEqual([])
  })

  it("ports out of range", () => {
    expect(globalProblems(`bind = "0.0.0.0:70000"`)).toEqual(["proxy.toml: bind: port 70000 is out of range 0..65535"])
    expect(serverProblems(`addresses = ["10.0.0.1:0"]`)).toEqual(["servers/lobby.toml: addresses[0]: port 0 is out of range 1..65535"])
    expect(serverProblems(`addresses = ["::1:25565"]`)[0]).toMatch(/IPv6 addresses need brackets/)
  })

  it("hosts that the resolver would read as another IPv4 address, and URLs, are refused with what is wrong", () => {
    // A port alone is the usual slip: "25565" would be the host 0.0.99.221.
    expect(globalProblems(`bind = "25565"`)).toEqual(['proxy.toml: bind: "25565" is not a valid host name or IP address'])
    expect(serverProblems(`addresses = ["127.1:25566", "0x7f.0.0.1", "10.0.0.010"]`)).toHaveLength(3)
    expect(globalProblems(`[web]\nbind = "http://127.0.0.1:8080"`)).toEqual([
      'proxy.toml: web.bind: expected host:port without a scheme, got "http://127.0.0.1:8080"'
    ])
    expect(serverProblems(`addresses = ["127.0.0.1:25566", "mc1.example.com", "[::1]:25566", "host-2:1", "[fe80::1%eth0]:25566"]`)).toEqual([])
    expect(serverProblems(`addresses = ["a"]\ndomains = ["127.0.0.1", "1.example.com", "25565", "*.1"]`)).toHaveLength(2)
  })

  it("sampling_ratio outside 0..1", () => {
    expect(globalProblems(`[telemetry.traces]\nsampling_ratio = 1.5`)).toEqual([
      "proxy.toml: telemetry.traces.sampling_ratio: expected a number between 0.0 and 1.0, got 1.5"
    ])
    expect(globalProblems(`[telemetry.traces]\nsampling_ratio = -0.1`)).toHaveLength(1)
  })

  it("negative counts", () => {
    expect(globalProblems(`max_connections = -1`)).toEqual(["proxy.toml: max_connections: expected an integer >= 0, got -1"])
    expect(globalProblems(`[keepalive]\nretries = -2`)).toEqual(["proxy.toml: keepalive.retries: expected an integer >= 0, got -2"])
    expect(serverProblems(server(`max_players = -5`))).toEqual(["servers/lobby.toml: max_players: expected an integer >= 0, got -5"])
    expect(globalProblems(`[status_cache]\nmax_entries = 1.5`)).toEqual(["proxy.toml: status_cache.max_entries: expected an integer, got 1.5"])
  })

  it("unknown enum values, with a suggestion for a near miss", () => {
    expect(globalProblems(`unknown_domain_behavior = "dorp"`)).toEqual([
      'proxy.toml: unknown_domain_behavior: expected one of "default_motd", "drop", got "dorp" (did you mean "drop"?)'
    ])
    expect(serverProblems(server(`proxy_mode = "zerocopy"`))[0]).toMatch(/proxy_mode: expected one of .* got "zerocopy" \(did you mean "zero_copy"\?\)/)
    expect(serverProblems(server(`balance = "random"`))[0]).toMatch(/balance: expected one of "first_available", "round_robin", "least_conn"/)
    expect(globalProblems(`[forwarding]\nmode = "velocity"`)[0]).toMatch(/forwarding\.mode: expected one of "none", "legacy", "legacy_guard", "modern"/)
    expect(serverProblems(server(`[server_manager]\ntype = "panl"`))).toEqual([
      'servers/lobby.toml: server_manager.type: expected one of "local", "panel", "controller", got "panl" (did you mean "panel"?)'
    ])
    expect(globalProblems(`[plugins.x]\npermissions = ["fly"]`)[0]).toMatch(/plugins\.x\.permissions\[0\]: expected one of "limbo", "command"/)
  })

  it("a plugin id of the wrong shape says what an id must be", () => {
    expect(globalProblems(`[plugins.Foo]\npath = "foo.wasm"`)).toEqual(['proxy.toml: plugins.Foo: "Foo" is not a valid id: plugin ids must match [a-z0-9_-]+'])
  })

  it("invalid CIDR ranges", () => {
    expect(globalProblems(`[ip_filter]\nblacklist = ["10.0.0.0/33"]`)).toEqual([
      'proxy.toml: ip_filter.blacklist[0]: "10.0.0.0/33" is not a valid CIDR range (for example "10.0.0.0/8" or "2001:db8::/32")'
    ])
    expect(serverProblems(server(`[ip_filter]\nwhitelist = ["banana"]`))).toEqual([
      'servers/lobby.toml: ip_filter.whitelist[0]: "banana" is not an IP address or CIDR range'
    ])
    expect(globalProblems(`[ip_filter]\nwhitelist = ["10.0.0.0/8", "2001:db8::/32", "192.168.1.7"]`)).toEqual([])
    // Forms ipaddr.js would read with another meaning (127/8 as 0.0.0.127/8, octal, short) are refused.
    expect(globalProblems(`[ip_filter]\nblacklist = ["127/8", "192.168.001.010", "10", "0x7f.0.0.1", "10.0.0.0/8x"]`)).toEqual([
      'proxy.toml: ip_filter.blacklist[0]: "127/8" is not a valid CIDR range (for example "10.0.0.0/8" or "2001:db8::/32")',
      'proxy.toml: ip_filter.blacklist[1]: "192.168.001.010" is not an IP address or CIDR range',
      'proxy.toml: ip_filter.blacklist[2]: "10" is not an IP address or CIDR range',
      'proxy.toml: ip_filter.blacklist[3]: "0x7f.0.0.1" is not an IP address or CIDR range',
      'proxy.toml: ip_filter.blacklist[4]: "10.0.0.0/8x" is not a valid CIDR range (for example "10.0.0.0/8" or "2001:db8::/32")'
    ])
  })

  it("URL shape of endpoint and api_url", () => {
    expect(globalProblems(`[telemetry]\nendpoint = "collector:4317"`)[0]).toMatch(/telemetry\.endpoint: .*scheme/)
    expect(globalProblems(`[telemetry]\nendpoint = "http://collector"`)[0]).toMatch(
      /telemetry\.endpoint: "http:\/\/collector" has no port/
    )
    expect(globalProblems(`[telemetry]\nendpoint = "http://collector:4318"`)).toEqual([])
    // A port that is its scheme's default is still a port.
    for (const endpoint of ["https://otel.example.com:443", "http://127.0.0.2:80", "https://[2001:db8::1]:443/otlp"]) {
      expect(globalProblems(`[telemetry]\nendpoint = "${endpoint}"`)).toEqual([])
    }
    expect(globalProblems(`[telemetry]\nendpoint = "https://[2001:db8::1]"`)[0]).toMatch(/has no port/)
    // The signal's path is appended: a query or fragment would swallow it. Credentials would be logged.
    expect(globalProblems(`[telemetry]\nendpoint = "http://collector:4318?x=1"`)[0]).toMatch(/has a query or fragment/)
    expect(globalProblems(`[telemetry]\nendpoint = "http://collector:4318/#frag"`)[0]).toMatch(/has a query or fragment/)
    expect(globalProblems(`[telemetry]\nendpoint = "http://user:secret@collector:4318"`)[0]).toMatch(/holds credentials/)
    const manager = (url: string) =>
      serverProblems(server(`[server_manager]\ntype = "panel"\napi_url = "${url}"\napi_key = "k"\nserver_id = "s"`))
    expect(manager("panel.example.com")[0]).toMatch(/server_manager\.api_url: "panel\.example\.com" is not a URL/)
    expect(manager("ftp://panel.example.com")[0]).toMatch(/has scheme "ftp"/)
    expect(manager("https://panel.example.com")).toEqual([])
    expect(manager("http://user:pw@panel.example.com")[0]).toMatch(/server_manager\.api_url: .* holds credentials/)
  })

  it("durations", () => {
    expect(globalProblems(`connect_timeout = "5 seconds"`)).toEqual([
      'proxy.toml: connect_timeout: expected a duration such as "500ms", "5s", "1h30m" or "7d", got "5 seconds"'
    ])
    expect(globalProblems(`connect_timeout = 5`)).toEqual([
      'proxy.toml: connect_timeout: expected a duration such as "500ms", "5s", "1h30m" or "7d", got 5'
    ])
    // A zero timer would spin or refuse every connection; one past 24 days would overflow Node's timer and fire at once.
    expect(globalProblems(`connect_timeout = "0s"\n[ban]\npurge_interval = "0ms"\n[telemetry.metrics]\nexport_interval = "0s"`)).toEqual([
      "proxy.toml: connect_timeout: expected a duration above zero",
      "proxy.toml: ban.purge_interval: expected a duration above zero",
      "proxy.toml: telemetry.metrics.export_interval: expected a duration above zero"
    ])
    expect(globalProblems(`connect_timeout = "30d"\n[active_health]\ninterval = "25d"`)).toEqual([
      "proxy.toml: connect_timeout: expected a duration of at most 24d",
      "proxy.toml: active_health.interval: expected a duration of at most 24d"
    ])
    expect(globalProblems(`connect_timeout = "24d"\n[rate_limit]\nwindow = "1h"\n[status_cache]\nttl = "0s"`)).toEqual([])
    expect(globalProblems(`[rate_limit]\nwindow = "0s"`)).toEqual(["proxy.toml: rate_limit.window: expected a duration above zero"])
    expect(serverProblems(server(`[timeouts]\nread = "0s"\nconnect = "0s"`))).toEqual([
      "servers/lobby.toml: timeouts.connect: expected a duration above zero",
      "servers/lobby.toml: timeouts.read: expected a duration above zero"
    ])
    expect(
      serverProblems(server(`[server_manager]\ntype = "panel"\napi_url = "http://p"\napi_key = "k"\nserver_id = "s"\npoll_interval = "0s"`))
    ).toEqual(["servers/lobby.toml: server_manager.poll_interval: expected a duration above zero"])
    expect(globalProblems(`receive_proxy_protocol = "yes"`)).toEqual(['proxy.toml: receive_proxy_protocol: expected true or false, got "yes"'])
    expect(globalProblems(`rate_limit = 5`)).toEqual(["proxy.toml: rate_limit: expected a table, got 5"])
    expect(serverProblems(`addresses = "10.0.0.1"`)).toEqual(['servers/lobby.toml: addresses: expected an array, got "10.0.0.1"'])
  })

  it("server files need addresses; domains must look like domains", () => {
    expect(serverProblems(`domains = ["a.com"]`)).toEqual(["servers/lobby.toml: addresses: is required"])
    expect(serverProblems(`addresses = []`)).toEqual(["servers/lobby.toml: addresses: expected at least one backend address"])
    expect(serverProblems(`addresses = ["a"]\ndomains = ["not a domain", "*.*.x"]`)).toHaveLength(2)
    expect(serverProblems(`addresses = [5]`)).toEqual([
      'servers/lobby.toml: addresses[0]: expected "host:port" or { address = "host:port", weight = N }, got 5'
    ])
  })

  it("server_manager providers need their fields", () => {
    expect(serverProblems(server(`[server_manager]\ntype = "local"`))).toEqual([
      "servers/lobby.toml: server_manager.command: is required",
      "servers/lobby.toml: server_manager.working_dir: is required"
    ])
    expect(serverProblems(server(`[server_manager]\ntype = "controller"\napi_url = "https://c.example.com:8443"`))).toEqual([
      "servers/lobby.toml: server_manager.api_key: is required",
      "servers/lobby.toml: server_manager.server_id: is required"
    ])
  })
})

describe("across files", () => {
  const def = (file: string, id: string, domains: Array<string>): ServerDefinition =>
    Either.getOrThrow(
      Either.map(decodeServerText(file, file, `addresses = ["a"]\ndomains = ${JSON.stringify(domains)}`), (d) => ({ ...d, id }))
    )

  it("duplicate server ids", () => {
    const { problems } = findServerConflicts([def("servers/a.toml", "lobby", ["a.com"]), def("servers/b.toml", "lobby", ["b.com"])])
    expect(problems.map(formatProblem)).toEqual(['servers/b.toml: server id "lobby" is already used by servers/a.toml'])
  })

  it("the same domain or wildcard in two servers names both files", () => {
    const exact = findServerConflicts([def("servers/a.toml", "a", ["play.example.com"]), def("servers/b.toml", "b", ["Play.Example.com"])])
    expect(exact.problems.map(formatProblem)).toEqual([
      'servers/b.toml: domains: domain "play.example.com" is already routed to server "a" (servers/a.toml)'
    ])
    const wildcard = findServerConflicts([def("servers/a.toml", "a", ["*.example.com"]), def("servers/b.toml", "b", ["*.example.com"])])
    expect(wildcard.problems).toHaveLength(1)
    const distinct = findServerConflicts([def("servers/a.toml", "a", ["*.example.com"]), def("servers/b.toml", "b", ["example.com"])])
    expect(distinct.problems).toEqual([])
    // Every clash of a file at once: its id and each domain already routed, so one fix is not followed by another.
    const many = findServerConflicts([
      def("servers/a.toml", "a", ["a.test", "*.w.test"]),
      def("servers/b.toml", "a", ["*.w.test", "b.test", "a.test"]),
      def("servers/c.toml", "c", ["b.test"])
    ])
    expect(many.problems.map(formatProblem)).toEqual([
      'servers/b.toml: server id "a" is already used by servers/a.toml',
      'servers/b.toml: domains: domain "*.w.test" is already routed to server "a" (servers/a.toml)',
      'servers/b.toml: domains: domain "a.test" is already routed to server "a" (servers/a.toml)'
    ])
    // The file held back routes nothing: the next one may have its domain.
    expect([...many.rejected].map((server) => server.file)).toEqual(["servers/b.toml"])
  })

  it("the id comes from name, else id, else the file name", () => {
    expect(Either.getOrThrow(decodeServerText("f", "lobby.toml", `addresses = ["a"]`)).id).toBe("lobby")
    expect(Either.getOrThrow(decodeServerText("f", "lobby.toml", `addresses = ["a"]\nid = "hub"`)).id).toBe("hub")
    expect(Either.getOrThrow(decodeServerText("f", "lobby.toml", `addresses = ["a"]\nid = "hub"\nname = "main"`)).id).toBe("main")
  })
})

describe("every problem in one pass", () => {
  it("the rules across keys of proxy.toml run beside the problems of other keys", () => {
    expect(globalProblems(`max_connections = -1\n[web]\nbind = "0.0.0.0:8080"\nenable_api = false\nenable_webui = true`)).toEqual([
      "proxy.toml: max_connections: expected an integer >= 0, got -1",
      "proxy.toml: web.enable_webui: the web UI needs the API: enable_webui = true requires enable_api = true"
    ])
    // A broken [web] gives no rule of its own beyond its problem.
    expect(globalProblems(`[web]\nbind = 5\napi_key = "short"`)).toEqual([expect.stringMatching(/^proxy\.toml: web\.bind: /)])
    // A problem in a sub-table only ([web.rate_limit]) leaves the options of [web] to their rules.
    expect(globalProblems(`[web]\nbind = "0.0.0.0:8080"\n[web.rate_limit]\nrpm = 5`)).toEqual([
      expect.stringMatching(/^proxy\.toml: web\.rate_limit\.rpm: unknown key/),
      expect.stringMatching(/^proxy\.toml: web\.api_key: is required because web\.bind 0\.0\.0\.0 is reachable/)
    ])
  })

  it("a broken proxy.toml still says where the server files are, unless servers_dir is what is broken", () => {
    const lookup = (text: string) => checkGlobalText("proxy.toml", text).serversDir
    expect(lookup(`servers_dir = "srv"\nmax_connections = -1`)).toEqual({ _tag: "Known", value: "srv" })
    expect(lookup(`max_connections = -1`)).toEqual({ _tag: "Known", value: "./servers" })
    expect(lookup(`servers_dir = ""`)).toEqual({ _tag: "Unknown", why: "servers_dir has a problem" })
    // Syntax errors: the lines before the error are read; a servers_dir after it is not guessed at.
    expect(lookup(`servers_dir = "srv"\n[rate_limit]\nwindow = = 1`)).toEqual({ _tag: "Known", value: "srv" })
    expect(lookup(`servers_dir = ""\nbind = = 1`)).toEqual({ _tag: "Unknown", why: "servers_dir is not a valid path" })
    expect(lookup(`bind = = 1\n[ban]\nfile = "b.json"`)).toMatchObject({ _tag: "Default", value: "./servers" })
    expect(lookup(`bind = = 1\nservers_dir = "srv"`)).toMatchObject({ _tag: "Unknown" })
    expect(checkGlobalText("proxy.toml", `bind = = 1`).partial).toBeUndefined()
  })

  it("a broken server file keeps its id and the domains that decode, for the rules across files", () => {
    const broken = checkServerText("servers/a.toml", "a.toml", `name = "hub"\ndomains = ["play.example.com", "bad domain"]\nmax_players = "x"`)
    expect(broken.problems.map(formatProblem)).toEqual([
      'servers/a.toml: domains[1]: "bad domain" is not a domain (expected "play.example.com" or "*.example.com")',
      "servers/a.toml: addresses: is required",
      'servers/a.toml: max_players: expected a number, got "x"'
    ])
    expect(broken.definition).toBeUndefined()
    expect(broken.identity).toEqual({ id: "hub", file: "servers/a.toml", config: { name: "hub", domains: ["play.example.com"] } })
    // A broken name leaves the id unknown: it clashes with nothing, its domains still do.
    const nameless = checkServerText("servers/b.toml", "b.toml", `name = "Not Valid"\ndomains = ["play.example.com"]\naddresses = ["a"]`)
    expect(nameless.identity?.id).toBeUndefined()
    const other = Either.getOrThrow(decodeServerText("servers/c.toml", "b.toml", `domains = ["other.example.com"]\naddresses = ["a"]`))
    expect(findServerConflicts([broken.identity!, nameless.identity!, other]).problems.map(formatProblem)).toEqual([
      'servers/b.toml: domains: domain "play.example.com" is already routed to server "hub" (servers/a.toml)'
    ])
    expect(checkServerText("servers/d.toml", "d.toml", `domains = [`).identity).toBeUndefined()
  })
})
