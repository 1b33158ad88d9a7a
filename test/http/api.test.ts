/**
 * The admin API end to end, on a real HTTP server, through the typed client made from the contract and plain fetch:
 * authentication on every route, the error bodies, the rate limit, CORS, the configuration writes and their checks,
 * and what the API does to real minecraft-protocol clients (a server added by PUT, a ban, a kick, the event stream).
 */
import { Effect, Either } from "effect"
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { keysMatch } from "../../src/http/handlers.js"
import { startPortal } from "../helpers/portal.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { waitFor } from "../helpers/wait.js"
import { API_KEY, readEvents, startWebPortal, typedClient } from "../helpers/web.js"
import { startFakePanel } from "../peers/fakePanel.js"
import { join, startBackend } from "../peers/minecraft.js"

const TOML = { "content-type": "application/toml" }
const JSON_BODY = { "content-type": "application/json" }

const serverFile = (port: number, domain = "mc.example.com") => `domains = ["${domain}"]\naddresses = ["127.0.0.1:${port}"]\n`

/** Every route but health, with a body where it takes one. */
const ROUTES: ReadonlyArray<readonly [string, string, RequestInit?]> = [
  ["GET", "/api/v1/proxy"],
  ["GET", "/api/v1/stats"],
  ["GET", "/api/v1/openapi.json"],
  ["GET", "/api/v1/events"],
  ["GET", "/api/v1/players"],
  ["GET", "/api/v1/players/Steve"],
  ["POST", "/api/v1/players/Steve/kick", { headers: JSON_BODY, body: "{}" }],
  ["GET", "/api/v1/servers"],
  ["POST", "/api/v1/servers/validate", { headers: TOML, body: serverFile(1) }],
  ["GET", "/api/v1/servers/main"],
  ["POST", "/api/v1/servers/main/start"],
  ["POST", "/api/v1/servers/main/stop"],
  ["GET", "/api/v1/servers/main/config"],
  ["PUT", "/api/v1/servers/main", { headers: TOML, body: serverFile(2) }],
  ["DELETE", "/api/v1/servers/main"],
  ["GET", "/api/v1/bans"],
  ["GET", "/api/v1/bans/check?ip=203.0.113.9"],
  ["POST", "/api/v1/bans", { headers: JSON_BODY, body: JSON.stringify({ target: { type: "ip", value: "203.0.113.9" }, reason: "x" }) }],
  ["DELETE", "/api/v1/bans/ip/203.0.113.9"],
  ["GET", "/api/v1/config"],
  ["GET", "/api/v1/config/raw"],
  ["PUT", "/api/v1/config/raw", { headers: TOML, body: "" }],
  ["POST", "/api/v1/config/reload"]
]

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(Effect.either(effect))

describe("authentication", () => {
  it("every route but health answers 401 with WWW-Authenticate without a key or with a wrong one, and changes nothing", async () => {
    const web = await startWebPortal({ web: `[web.rate_limit]\nrequests_per_minute = 1000`, servers: { "main.toml": serverFile(1) } })
    const health = await fetch(`${web.base}/api/v1/health`)
    expect(health.status).toBe(200)
    expect(await health.json()).toEqual({ status: "ok" })
    for (const [method, route, init] of ROUTES) {
      for (const headers of [{}, { authorization: "Bearer wrong-key-0123456789abc" }, { authorization: API_KEY }]) {
        const response = await fetch(`${web.base}${route}`, { method, ...init, headers: { ...(init?.headers as object), ...headers } })
        expect(response.status, `${method} ${route} ${JSON.stringify(headers)}`).toBe(401)
        expect(response.headers.get("www-authenticate")).toBe('Bearer realm="portal"')
        expect(await response.json()).toEqual({ error: { code: "unauthorized", message: "a valid key is required: Authorization: Bearer <api_key>" } })
      }
    }
    // Nothing was deleted, written or banned.
    expect(readFileSync(path.join(web.dir.serversDir, "main.toml"), "utf8")).toBe(serverFile(1))
    const bans = await run(web.client.bans.list({ urlParams: {} }))
    expect(bans).toEqual(Either.right([]))
  })

  it("the right key works on every route through the typed client", async () => {
    const panel = await startFakePanel({ state: "offline" })
    const web = await startWebPortal({
      web: `[web.rate_limit]\nrequests_per_minute = 1000`,
      servers: {
        "main.toml": serverFile(1),
        "managed.toml": [
          serverFile(2, "managed.example.com"),
          `[server_manager]`,
          `type = "panel"`,
          `api_url = "${panel.url}"`,
          `api_key = "${panel.apiKey}"`,
          `server_id = "${panel.serverId}"`,
          `poll_interval = "100ms"`
        ].join("\n")
      }
    })
    const { client } = web
    expect(await run(client.health.health())).toEqual(Either.right({ status: "ok" }))
    const info = await Effect.runPromise(client.proxy.info())
    expect(info).toMatchObject({ version: expect.any(String), servers: 2, players_online: 0 })
    // worker_threads is not set: one worker per core, each running (one thread runs everything on one core).
    expect(info.workers.running).toBe(info.workers.configured)
    expect(info.features.active).toContain("web")
    expect(info.features.active).toContain("server_manager")
    const stats = await Effect.runPromise(client.proxy.stats())
    expect(stats.connections).toMatchObject({ total: 0, active: 0 })
    expect(stats.logins).toEqual({ total: 0, per_second: 0 })
    const openapi = await Effect.runPromise(client.proxy.openapi())
    expect(Object.keys(openapi["paths"] as object)).toContain("/api/v1/servers/{id}")
    // A request that does not match the contract is documented as it is answered: the one error shape.
    const badBan = (openapi["paths"] as Record<string, any>)["/api/v1/bans"].post.responses["400"].content["application/json"].schema
    expect(badBan).toEqual({ $ref: "#/components/schemas/BadRequest" })
    expect(JSON.stringify(openapi)).not.toContain("HttpApiDecodeError")
    expect(await run(client.players.list({ urlParams: {} }))).toEqual(Either.right([]))
    const missing = await run(client.players.get({ path: { player: "Steve" } }))
    expect(Either.isLeft(missing) && missing.left).toMatchObject({ _tag: "NotFound", error: { code: "not_found" } })

    const servers = await Effect.runPromise(client.servers.list())
    expect(servers.map((server) => [server.id, server.managed, server.state])).toEqual([
      ["main", false, "online"],
      ["managed", true, "sleeping"]
    ])
    expect(servers[0]!.addresses).toEqual([{ address: "127.0.0.1:1", weight: 1, active: 0, healthy: true, ejected: false, failures: 0 }])
    const stream = await readEvents(web.base)
    const started = await Effect.runPromise(client.servers.start({ path: { id: "managed" } }))
    expect(started).toMatchObject({ id: "managed", begun: true, state: "starting" })
    await waitFor(async () => (await Effect.runPromise(client.servers.get({ path: { id: "managed" } }))).state === "online", { what: "online" })
    expect(await Effect.runPromise(client.servers.stop({ path: { id: "managed" } }))).toMatchObject({ begun: true, state: "stopping" })
    await waitFor(() => panel.signals.length === 2, { what: "the stop signal" })
    expect(panel.signals).toEqual(["start", "stop"])
    await stream.next((event) => event.event === "server.state" && (event.data as { to: string }).to === "stopping", "server.state stopping")
    expect(stream.events.filter((event) => event.event === "server.state").map((event) => event.data)).toEqual([
      expect.objectContaining({ server: "managed", from: "sleeping", to: "starting" }),
      expect.objectContaining({ server: "managed", from: "starting", to: "online" }),
      expect.objectContaining({ server: "managed", from: "online", to: "stopping" })
    ])
    const notManaged = await run(client.servers.start({ path: { id: "main" } }))
    expect(Either.isLeft(notManaged) && notManaged.left).toMatchObject({ _tag: "Conflict", error: { code: "not_managed" } })

    expect(await Effect.runPromise(client.servers.config({ path: { id: "main" } }))).toBe(serverFile(1))
    expect(await Effect.runPromise(client.servers.validate({ urlParams: {}, payload: serverFile(3, "new.example.com") }))).toEqual({
      valid: true,
      problems: []
    })
    const put = await Effect.runPromise(client.servers.put({ path: { id: "main" }, payload: serverFile(4) }))
    expect(put).toMatchObject({ id: "main", created: false, applied: true, server: { addresses: [{ address: "127.0.0.1:4" }] } })
    expect(await run(client.servers.remove({ path: { id: "main" } }))).toEqual(Either.right(undefined))
    expect(Either.isLeft(await run(client.servers.get({ path: { id: "main" } })))).toBe(true)

    const ban = await Effect.runPromise(
      client.bans.create({ payload: { target: { type: "username", value: "Griefer" }, reason: "griefing", duration: "1h" } })
    )
    expect(ban).toMatchObject({ target: { type: "username", value: "Griefer" }, reason: "griefing", source: "api" })
    expect(ban.expires_at! - ban.created_at).toBeGreaterThanOrEqual(3600)
    expect(await Effect.runPromise(client.bans.list({ urlParams: { type: "username" } }))).toEqual([ban])
    expect(await Effect.runPromise(client.bans.list({ urlParams: { type: "ip" } }))).toEqual([])
    expect(await Effect.runPromise(client.bans.check({ urlParams: { username: "griefer" } }))).toEqual({ banned: true, ban })
    expect(await run(client.bans.remove({ path: { type: "username", value: "Griefer" } }))).toEqual(Either.right(undefined))
    expect(await Effect.runPromise(client.bans.check({ urlParams: { username: "Griefer" } }))).toEqual({ banned: false, ban: null })

    const config = await Effect.runPromise(client.config.get())
    expect((config.global["web"] as { api_key: string }).api_key).toBe("<redacted>")
    expect((config.servers["managed"] as { server_manager: { api_key: string } }).server_manager.api_key).toBe("<redacted>")
    expect(JSON.stringify(config)).not.toContain(API_KEY)
    expect(JSON.stringify(config)).not.toContain(panel.apiKey)
    const raw = await Effect.runPromise(client.config.raw())
    expect(raw).toBe(readFileSync(web.dir.configFile, "utf8"))
    expect(await Effect.runPromise(client.config.putRaw({ payload: raw.replace('bind = "127.0.0.1:0"', 'bind = "127.0.0.1:0"\nmax_connections = 50') }))).toEqual({
      restart_required: []
    })
    await waitFor(async () => ((await Effect.runPromise(client.config.get())).global["max_connections"] === 50 ? true : undefined), {
      what: "max_connections applied"
    })
    expect(await Effect.runPromise(client.config.reload())).toMatchObject({ restart_required: [] })
  })

  it("a loopback [web] without api_key logs a key for the run and where to sign in with it, and that key works", async () => {
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n[web]\nbind = "127.0.0.1:0"\n`)
    const portal = await startPortal(dir.configFile)
    const warning = await portal.waitForLog(/api_key is not set/)
    // Port 0: the real port is not known yet, so the line points to the one logged once the server listens.
    expect(warning).toMatch(/^WARN .*Sign in to the web UI at the address logged once it listens .* with the key [A-Za-z0-9_-]{32} ;/)
    const key = /with the key ([A-Za-z0-9_-]{32})/.exec(warning)![1]!
    const base = /listening on (http:\/\/\S+)/.exec(await portal.waitForLog(/web admin: listening on/))![1]!
    expect((await fetch(`${base}/api/v1/proxy`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200)
    expect((await fetch(`${base}/api/v1/proxy`, { headers: { authorization: `Bearer ${API_KEY}` } })).status).toBe(401)
    expect((await fetch(`${base}/`)).status).toBe(200)
  })

  it("compares keys by content only", () => {
    expect(keysMatch(API_KEY, API_KEY)).toBe(true)
    expect(keysMatch(`${API_KEY}x`, API_KEY)).toBe(false)
    expect(keysMatch("", API_KEY)).toBe(false)
  })
})

describe("errors", () => {
  it("400, 404, 409, 413 and 415 answer the one error shape", async () => {
    const web = await startWebPortal({ web: `[web.rate_limit]\nrequests_per_minute = 1000`, servers: { "main.toml": serverFile(1) } })
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const body = async (response: Response): Promise<{ status: number; body: any }> => ({ status: response.status, body: await response.json() })

    expect(await body(await web.request("/api/v1/nothing-here"))).toEqual({
      status: 404,
      body: { error: { code: "not_found", message: "no route GET /api/v1/nothing-here" } }
    })
    expect(await body(await web.request("/api/v1/servers/ghost"))).toEqual({ status: 404, body: { error: { code: "not_found", message: 'no server "ghost"' } } })
    expect(await body(await web.request("/api/v1/players/Nobody/kick", { method: "POST", headers: JSON_BODY, body: "{}" }))).toEqual({
      status: 404,
      body: { error: { code: "not_found", message: 'no player "Nobody"' } }
    })
    const mismatch = await body(await web.request("/api/v1/bans", { method: "POST", headers: JSON_BODY, body: JSON.stringify({ target: { type: "mac" } }) }))
    expect(mismatch.status).toBe(400)
    expect(mismatch.body.error.code).toBe("bad_request")
    expect(mismatch.body.error.details.issues.map((issue: { path: string }) => issue.path)).toContain("target.type")
    // In one line, naming where: the decoder's own message is a tree.
    expect(mismatch.body.error.message).toMatch(/^target\.type: /)
    expect(mismatch.body.error.message).not.toContain("\n")
    expect(await body(await web.request("/api/v1/bans", { method: "POST", headers: JSON_BODY, body: '{"target": ' }))).toEqual({
      status: 400,
      body: { error: { code: "bad_request", message: "the body is not valid JSON" } }
    })
    for (const type of ["text/plain", "application/x-www-form-urlencoded"]) {
      const sent = JSON.stringify({ target: { type: "ip", value: "1.2.3.4" } })
      expect(await body(await web.request("/api/v1/bans", { method: "POST", headers: { "content-type": type }, body: sent }))).toEqual({
        status: 415,
        body: { error: { code: "unsupported_media_type", message: `send the body as application/json, not ${type}` } }
      })
    }
    expect(await body(await web.request("/api/v1/bans", { method: "POST", headers: JSON_BODY, body: JSON.stringify({ target: { type: "ip", value: "1.2.3" } }) }))).toMatchObject({
      status: 400,
      body: { error: { code: "invalid_target" } }
    })
    expect(
      await body(await web.request("/api/v1/bans", { method: "POST", headers: JSON_BODY, body: JSON.stringify({ target: { type: "ip", value: "1.2.3.4" }, duration: "soon" }) }))
    ).toMatchObject({ status: 400, body: { error: { code: "invalid_duration" } } })
    // A zero or an endless duration is the caller's mistake, refused before anything is written.
    for (const duration of ["0s", "999999999d"]) {
      expect(
        await body(await web.request("/api/v1/bans", { method: "POST", headers: JSON_BODY, body: JSON.stringify({ target: { type: "ip", value: "1.2.3.5" }, duration }) }))
      ).toMatchObject({ status: 400, body: { error: { code: "invalid_duration" } } })
    }
    expect(await body(await web.request("/api/v1/bans/check?ip=1.2.3.5"))).toMatchObject({ status: 200, body: { banned: false } })
    // A check is of one address, as a connection has: a range is refused rather than answered "not banned".
    expect(await body(await web.request(`/api/v1/bans/check?ip=${encodeURIComponent("203.0.113.0/24")}`))).toMatchObject({
      status: 400,
      body: { error: { code: "invalid_target", message: expect.stringContaining("not the range 203.0.113.0/24") } }
    })
    const invalid = await body(await web.request("/api/v1/servers/broken", { method: "PUT", headers: TOML, body: `domains = ["b.example.com"]\naddreses = []` }))
    expect(invalid.status).toBe(400)
    expect(invalid.body.error.code).toBe("invalid_config")
    expect(invalid.body.error.details.problems.map((problem: { path: string }) => problem.path)).toEqual(["addreses", "addresses"])
    expect(invalid.body.error.details.problems[0].message).toMatch(/did you mean "addresses"/)
    expect(await body(await web.request("/api/v1/servers/main/start", { method: "POST" }))).toMatchObject({ status: 409, body: { error: { code: "not_managed" } } })
    expect(await body(await web.request("/api/v1/servers/main", { method: "PUT", headers: JSON_BODY, body: "{}" }))).toMatchObject({
      status: 415,
      body: { error: { code: "unsupported_media_type" } }
    })
    // A TOML file is UTF-8: another charset, or bytes that are not UTF-8, are refused and nothing is written.
    const latin1 = Buffer.concat([Buffer.from(`domains = ["caf`), Buffer.from([0xe9]), Buffer.from(`.example.com"]\naddresses = ["127.0.0.1:9"]\n`)])
    expect(await body(await web.request("/api/v1/servers/latin", { method: "PUT", headers: { "content-type": "text/plain; charset=iso-8859-1" }, body: latin1 }))).toMatchObject({
      status: 415,
      body: { error: { code: "unsupported_media_type", message: expect.stringContaining("iso-8859-1") } }
    })
    expect(await body(await web.request("/api/v1/servers/latin", { method: "PUT", headers: TOML, body: latin1 }))).toMatchObject({
      status: 400,
      body: { error: { code: "bad_request", message: expect.stringContaining("not UTF-8") } }
    })
    expect(() => readFileSync(path.join(web.dir.serversDir, "latin.toml"))).toThrow()
    const accented = `domains = ["utf.example.com"]\naddresses = ["127.0.0.1:9"]\n[motd.online]\ntext = "Café ✓"\n`
    expect((await web.request("/api/v1/servers/utf", { method: "PUT", headers: { "content-type": "application/toml; charset=UTF-8" }, body: accented })).status).toBe(200)
    expect(readFileSync(path.join(web.dir.serversDir, "utf.toml"), "utf8")).toBe(accented)
    expect(await body(await web.request("/api/v1/servers/main", { method: "PUT", headers: TOML, body: "#".repeat(300 * 1024) }))).toMatchObject({
      status: 413,
      body: { error: { code: "payload_too_large" } }
    })
    // Without a declared length (chunked): the same 413 past the bound, and a body within it is read as any other.
    const chunked = (text: string, chunks: number): RequestInit =>
      ({
        method: "PUT",
        headers: TOML,
        duplex: "half",
        body: new ReadableStream({
          start(controller) {
            for (let i = 0; i < chunks; i++) controller.enqueue(new TextEncoder().encode(text))
            controller.close()
          }
        })
      }) as RequestInit
    expect(await body(await web.request("/api/v1/servers/main", chunked("#".repeat(64 * 1024), 6)))).toMatchObject({
      status: 413,
      body: { error: { code: "payload_too_large" } }
    })
    expect(readFileSync(path.join(web.dir.serversDir, "main.toml"), "utf8")).toBe(serverFile(1))
    const streamedFile = serverFile(2, "chunked.example.com")
    expect((await web.request("/api/v1/servers/streamed", chunked(streamedFile, 1))).status).toBe(200)
    expect(readFileSync(path.join(web.dir.serversDir, "streamed.toml"), "utf8")).toBe(streamedFile)
    // A path that would name a file elsewhere is refused, and nothing is written.
    const escape = await body(await web.request("/api/v1/servers/..%2Fproxy", { method: "PUT", headers: TOML, body: serverFile(1, "x.example.com") }))
    expect(escape.status).toBe(400)
    expect(escape.body.error.details.problems[0].message).toMatch(/must match \[a-z0-9_-\]\+/)
  })
})

describe("rate limit", () => {
  it("every answer carries X-RateLimit-*; failed authentications count; past the limit 429 with Retry-After", async () => {
    const web = await startWebPortal({ web: `[web.rate_limit]\nrequests_per_minute = 3` })
    const first = await fetch(`${web.base}/api/v1/proxy`, { headers: { authorization: "Bearer wrong-key-0123456789abc" } })
    expect(first.status).toBe(401)
    expect([first.headers.get("x-ratelimit-limit"), first.headers.get("x-ratelimit-remaining")]).toEqual(["3", "2"])
    const reset = Number(first.headers.get("x-ratelimit-reset"))
    expect(reset).toBeGreaterThan(0)
    expect(reset).toBeLessThanOrEqual(60)
    expect((await fetch(`${web.base}/api/v1/health`)).headers.get("x-ratelimit-remaining")).toBe("1")
    expect((await web.request("/api/v1/proxy")).headers.get("x-ratelimit-remaining")).toBe("0")
    const over = await web.request("/api/v1/proxy")
    expect(over.status).toBe(429)
    expect(Number(over.headers.get("retry-after"))).toBeGreaterThan(0)
    expect(over.headers.get("x-ratelimit-remaining")).toBe("0")
    expect(await over.json()).toEqual({ error: { code: "rate_limited", message: expect.stringMatching(/^more than 3 requests in a minute/) } })
    // The typed client sees the same answer as its error.
    const client = await typedClient(web.base, API_KEY)
    const refused = await run(client.proxy.info())
    expect(Either.isLeft(refused) && refused.left).toMatchObject({ _tag: "TooManyRequests", error: { code: "rate_limited" } })
  })
})

describe("CORS", () => {
  it("answers a preflight from an origin in cors_origins and gives another origin nothing of CORS", async () => {
    const web = await startWebPortal({ web: `cors_origins = ["https://admin.example.com"]` })
    const preflight = (origin: string) =>
      fetch(`${web.base}/api/v1/bans`, {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" }
      })
    const allowed = await preflight("https://admin.example.com")
    expect(allowed.status).toBe(204)
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://admin.example.com")
    expect(allowed.headers.get("access-control-allow-headers")).toMatch(/authorization/)
    expect(allowed.headers.get("access-control-allow-methods")).toMatch(/POST/)
    const refused = await preflight("https://evil.example.net")
    expect([...refused.headers.keys()].filter((name) => name.startsWith("access-control-"))).toEqual([])
    const real = await web.request("/api/v1/proxy", { headers: { origin: "https://admin.example.com" } })
    expect(real.headers.get("access-control-allow-origin")).toBe("https://admin.example.com")
    expect(real.headers.get("access-control-expose-headers")).toMatch(/x-ratelimit-remaining/)
    const other = await web.request("/api/v1/proxy", { headers: { origin: "https://evil.example.net" } })
    expect(other.headers.get("access-control-allow-origin")).toBeNull()
  })
})

describe("configuration writes", () => {
  it("a proxy.toml that breaks a web rule is refused with the problems and nothing is written", async () => {
    const web = await startWebPortal()
    const before = readFileSync(web.dir.configFile, "utf8")
    const attempts = [
      before.replace(`api_key = "${API_KEY}"`, `api_key = "short"`),
      before.replace(`[web]`, `[web]\nenable_api = false\nenable_webui = true`),
      before.replace(`bind = "127.0.0.1:0"\napi_key = "${API_KEY}"`, `bind = "0.0.0.0:0"`),
      before.replace(`api_key = "${API_KEY}"`, `api_key = "CHANGE-ME"`),
      `${before}\nmax_conections = 3\n`,
      // Valid by the schema, but the next start would stop on it.
      `servers_dir = "./no-such-folder"\n${before}`
    ]
    const paths = []
    for (const text of attempts) {
      const response = await web.request("/api/v1/config/raw", { method: "PUT", headers: TOML, body: text })
      expect(response.status).toBe(400)
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const body: any = await response.json()
      expect(body.error.code).toBe("invalid_config")
      paths.push(body.error.details.problems.map((problem: { path: string }) => problem.path))
    }
    expect(paths).toEqual([["web.api_key"], ["web.enable_webui"], ["web.api_key"], ["web.api_key"], ["web.max_conections"], [""]])
    expect(readFileSync(web.dir.configFile, "utf8")).toBe(before)
    // A valid change to a restart-only option is written and named.
    const moved = before.replace(`[web.rate_limit]`, `[web.rate_limit]`).replace(`[web]\nbind = "127.0.0.1:0"`, `[web]\nbind = "127.0.0.1:0"\ncors_origins = ["https://a.example.com"]`)
    const written = await web.request("/api/v1/config/raw", { method: "PUT", headers: TOML, body: moved })
    expect(await written.json()).toEqual({ restart_required: ["web"] })
    expect(readFileSync(web.dir.configFile, "utf8")).toBe(moved)
  })

  it("a server whose file name holds other characters than [a-z0-9_-] is read, written and removed like any other", async () => {
    const web = await startWebPortal({ servers: { "Lobby.Main.toml": serverFile(1) } })
    const file = path.join(web.dir.root, "servers", "Lobby.Main.toml")
    const read = await web.request("/api/v1/servers/Lobby.Main/config")
    expect([read.status, await read.text()]).toEqual([200, serverFile(1)])
    const written = await web.request("/api/v1/servers/Lobby.Main", { method: "PUT", headers: TOML, body: serverFile(2) })
    expect(written.status).toBe(200)
    expect(readFileSync(file, "utf8")).toBe(serverFile(2))
    expect((await web.request("/api/v1/servers/Lobby.Main", { method: "DELETE" })).status).toBe(204)
    expect(() => readFileSync(file)).toThrow()
    // A new server still needs an id that can only name a file in servers_dir.
    const created = await web.request("/api/v1/servers/New.Server", { method: "PUT", headers: TOML, body: serverFile(3, "new.example.com") })
    expect(created.status).toBe(400)
  })

  it("a new id whose file holds another server (its name key) is refused: that server is neither read, overwritten nor removed", async () => {
    const hub = `name = "hub"\n${serverFile(1, "hub.example.com")}`
    const web = await startWebPortal({ servers: { "alpha.toml": hub } })
    const file = path.join(web.dir.serversDir, "alpha.toml")
    expect((await web.request("/api/v1/servers/hub")).status).toBe(200)
    expect((await web.request("/api/v1/servers/alpha")).status).toBe(404)
    expect((await web.request("/api/v1/servers/alpha/config")).status).toBe(404)
    const checked = await web.request("/api/v1/servers/validate?id=alpha", { method: "POST", headers: TOML, body: serverFile(2, "alpha.example.com") })
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const verdict: any = await checked.json()
    expect(verdict.valid).toBe(false)
    expect(verdict.problems[0].message).toContain('holds server "hub"')
    const written = await web.request("/api/v1/servers/alpha", { method: "PUT", headers: TOML, body: serverFile(2, "alpha.example.com") })
    expect(written.status).toBe(400)
    expect((await web.request("/api/v1/servers/alpha", { method: "DELETE" })).status).toBe(404)
    expect(readFileSync(file, "utf8")).toBe(hub)
    expect((await web.request("/api/v1/servers/hub")).status).toBe(200)
  })

  it("a server PUT with a [server_manager] is answered as managed, in its first state", async () => {
    const panel = await startFakePanel({ state: "offline" })
    const web = await startWebPortal()
    const text = [
      serverFile(2, "managed.example.com"),
      `[server_manager]`,
      `type = "panel"`,
      `api_url = "${panel.url}"`,
      `api_key = "${panel.apiKey}"`,
      `server_id = "${panel.serverId}"`
    ].join("\n")
    const response = await web.request("/api/v1/servers/managed", { method: "PUT", headers: TOML, body: text })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ id: "managed", created: true, applied: true, server: { managed: true, state: "sleeping" } })
  })

  it("validate without an id checks as a new server: a server called new is no exception", async () => {
    const web = await startWebPortal({ servers: { "new.toml": serverFile(1, "taken.example.com") } })
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const verdict = async (query: string, text: string): Promise<any> =>
      (await web.request(`/api/v1/servers/validate${query}`, { method: "POST", headers: TOML, body: text })).json()
    const clash = await verdict("", serverFile(2, "taken.example.com"))
    expect(clash.valid).toBe(false)
    expect(clash.problems[0].message).toMatch(/domain "taken\.example\.com" is already routed to server "new"/)
    expect((await verdict("", serverFile(2, "free.example.com"))).valid).toBe(true)
    // Its own name key names it: one that exists is refused.
    const named = await verdict("", `name = "new"\n${serverFile(2, "free.example.com")}`)
    expect(named.problems[0].message).toMatch(/a server "new" exists already/)
  })

  it("parallel writes are checked one after another: of five new servers claiming one domain, one is written", async () => {
    const web = await startWebPortal({ web: `[web.rate_limit]\nrequests_per_minute = 1000` })
    const answers = await Promise.all(
      [0, 1, 2, 3, 4].map((index) =>
        web.request(`/api/v1/servers/race${index}`, { method: "PUT", headers: TOML, body: serverFile(10 + index, "same.example.com") })
      )
    )
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 400, 400, 400, 400])
    const files = [0, 1, 2, 3, 4].filter((index) => {
      try {
        readFileSync(path.join(web.dir.serversDir, `race${index}.toml`))
        return true
      } catch {
        return false
      }
    })
    expect(files).toHaveLength(1)
  })

  it("a server PUT through the API is reachable by a real client within two seconds; DELETE takes it away", async () => {
    const backend = await startBackend("lobby", { hold: true })
    const web = await startWebPortal()
    const started = Date.now()
    const response = await web.request("/api/v1/servers/lobby", { method: "PUT", headers: { "content-type": "text/plain" }, body: serverFile(backend.port, "lobby.example.com") })
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({ id: "lobby", created: true, applied: true, server: { domains: ["lobby.example.com"], state: "online" } })
    // The answer comes once the server is in the configuration in force: routable from then on, well within 2 s (the
    // client library's own start, which is slow on a loaded machine, is not counted).
    expect(Date.now() - started).toBeLessThan(2000)
    const joined = await join(web.portal.port, "lobby.example.com", { username: "Alex" })
    expect(joined._tag).toBe("Joined")
    expect(backend.handshakes.map((handshake) => handshake.host)).toEqual(["lobby.example.com"])
    expect(readFileSync(path.join(web.dir.serversDir, "lobby.toml"), "utf8")).toBe(serverFile(backend.port, "lobby.example.com"))
    expect((await web.request("/api/v1/servers/lobby", { method: "DELETE" })).status).toBe(204)
    expect((await web.request("/api/v1/servers/lobby")).status).toBe(404)
    expect((await join(web.portal.port, "lobby.example.com", { username: "Late" }))._tag).toBe("Kicked")
  })
})

describe("players", () => {
  it("lists a real player, kicks them with the reason, and a ban through the API removes an online player", async () => {
    const backend = await startBackend("main", { hold: true })
    const web = await startWebPortal({ servers: { "main.toml": serverFile(backend.port) } })
    const steve = await join(web.portal.port, "mc.example.com", { username: "Steve" })
    const alex = await join(web.portal.port, "mc.example.com", { username: "Alex" })
    expect([steve._tag, alex._tag]).toEqual(["Joined", "Joined"])
    const players = await Effect.runPromise(web.client.players.list({ urlParams: { q: "ste" } }))
    expect(players).toEqual([
      expect.objectContaining({ name: "Steve", server: "main", address: "127.0.0.1", backend: `127.0.0.1:${backend.port}`, protocol_version: 765 })
    ])
    expect(await Effect.runPromise(web.client.players.kick({ path: { player: "steve" }, payload: { reason: "Take a break" } }))).toEqual({ kicked: 1 })
    await waitFor(() => backend.players.size === 1, { what: "Steve to leave the backend" })
    await web.portal.waitForLog(/Steve .*left main after .* \(ended: Take a break;/)
    // No body at all: the default reason.
    const kim = await join(web.portal.port, "mc.example.com", { username: "Kim" })
    expect(kim._tag).toBe("Joined")
    const bare = await web.request("/api/v1/players/Kim/kick", { method: "POST" })
    expect([bare.status, await bare.json()]).toEqual([200, { kicked: 1 }])
    await web.portal.waitForLog(/Kim .*left main after .* \(ended: Kicked by an operator;/)
    await waitFor(() => backend.players.size === 1, { what: "Kim to leave the backend" })

    const ban = await web.request("/api/v1/bans", { method: "POST", headers: JSON_BODY, body: JSON.stringify({ target: { type: "username", value: "Alex" }, reason: "griefing" }) })
    expect(ban.status).toBe(201)
    await waitFor(() => backend.players.size === 0, { what: "Alex to be removed" })
    await waitFor(async () => ((await Effect.runPromise(web.client.players.list({ urlParams: {} }))).length === 0 ? true : undefined), {
      what: "no player left"
    })
    const again = await join(web.portal.port, "mc.example.com", { username: "Alex" })
    expect(again._tag === "Kicked" && again.reason).toMatch(/griefing/)
    expect(JSON.parse(readFileSync(path.join(web.dir.root, "bans.json"), "utf8")).audit_log[0]).toMatchObject({ action: "ban", source: "api" })
  })
})

describe("events", () => {
  it("a real client joining and leaving arrives in order, with bans, reloads and the stats tick; Last-Event-ID resumes", async () => {
    const backend = await startBackend("main", { hold: true })
    const web = await startWebPortal({ servers: { "main.toml": serverFile(backend.port) } })
    const stream = await readEvents(web.base)
    const joined = await join(web.portal.port, "mc.example.com", { username: "Steve" })
    if (joined._tag !== "Joined") throw new Error("Steve did not join")
    await stream.next((event) => event.event === "player.join", "player.join")
    joined.leave()
    await stream.next((event) => event.event === "player.leave", "player.leave")
    await web.request("/api/v1/bans", { method: "POST", headers: JSON_BODY, body: JSON.stringify({ target: { type: "ip", value: "203.0.113.0/24" } }) })
    await web.request(`/api/v1/bans/ip/${encodeURIComponent("203.0.113.0/24")}`, { method: "DELETE" })
    await web.request("/api/v1/servers/extra", { method: "PUT", headers: TOML, body: serverFile(1, "extra.example.com") })
    await stream.next((event) => event.event === "config.reload", "config.reload")
    await stream.next((event) => event.event === "stats", "stats", 3000)
    const story = stream.events.filter((event) => event.event !== "stats")
    expect(story.map((event) => event.event)).toEqual(["player.join", "player.leave", "ban.created", "ban.removed", "config.reload"])
    expect(story[0]!.data).toMatchObject({ name: "Steve", server: "main" })
    expect(story[1]!.data).toMatchObject({ name: "Steve", server: "main" })
    expect((story[1]!.data as { bytes_in: number }).bytes_in).toBeGreaterThan(0)
    expect(story[2]!.data).toMatchObject({ target: { type: "ip", value: "203.0.113.0/24" } })
    expect(story[4]!.data).toMatchObject({ added: ["extra"] })
    const ids = stream.events.map((event) => event.id)
    expect(ids).toEqual([...ids].sort((a, b) => a - b))
    const stats = stream.events.find((event) => event.event === "stats")!.data as { logins: { total: number } }
    expect(stats.logins.total).toBe(1)

    // A client that reconnects with Last-Event-ID gets what it missed.
    const resumed = await readEvents(web.base, API_KEY, { "last-event-id": String(story[0]!.id) })
    await resumed.next((event) => event.event === "config.reload", "the replayed config.reload")
    expect(resumed.events.filter((event) => event.event !== "stats").map((event) => event.event)).toEqual([
      "player.leave",
      "ban.created",
      "ban.removed",
      "config.reload"
    ])

    // After a restart (another Portal here), the last id of the run before still resumes: its events are all newer.
    const next = await startWebPortal({ servers: { "main.toml": serverFile(backend.port) } })
    await next.request("/api/v1/servers/other", { method: "PUT", headers: TOML, body: serverFile(2, "other.example.com") })
    const acrossRestart = await readEvents(next.base, API_KEY, { "last-event-id": String(ids[ids.length - 1]) })
    await acrossRestart.next((event) => event.event === "config.reload", "config.reload of the next run")
    expect(acrossRestart.events[0]!.id).toBeGreaterThan(ids[ids.length - 1]!)
    // An id no run has reached yet replays what is remembered, instead of waiting for it.
    const future = await readEvents(next.base, API_KEY, { "last-event-id": String(Number.MAX_SAFE_INTEGER) })
    await future.next((event) => event.event === "config.reload", "config.reload for an id from the future")
  })

  it("an address failing its health checks, and passing again, is announced as backend.health", async () => {
    const backend = await startBackend("main")
    const web = await startWebPortal({
      servers: {
        "main.toml": `${serverFile(backend.port)}[active_health]\nenabled = true\ninterval = "100ms"\nunhealthy_interval = "100ms"\ntimeout = "500ms"\n`
      }
    })
    const stream = await readEvents(web.base)
    await backend.close()
    const down = await stream.next((event) => event.event === "backend.health", "backend.health down")
    expect(down.data).toMatchObject({ server: "main", address: `127.0.0.1:${backend.port}`, healthy: false, reason: expect.any(String) })
    expect((await Effect.runPromise(web.client.servers.get({ path: { id: "main" } }))).state).toBe("unreachable")
    await startBackend("main", { port: backend.port })
    const up = await stream.next((event) => event.event === "backend.health" && (event.data as { healthy: boolean }).healthy, "backend.health up")
    expect(up.data).toEqual({ server: "main", address: `127.0.0.1:${backend.port}`, healthy: true, reason: null })
  })

  it("health turns 503 while Portal drains its connections, and an open event stream does not hold the shutdown", async () => {
    const backend = await startBackend("main", { hold: true })
    const web = await startWebPortal({ servers: { "main.toml": serverFile(backend.port) } })
    await readEvents(web.base)
    const joined = await join(web.portal.port, "mc.example.com", { username: "Steve" })
    expect(joined._tag).toBe("Joined")
    const grace = process.env.PORTAL_SHUTDOWN_GRACE_MS
    process.env.PORTAL_SHUTDOWN_GRACE_MS = "1500"
    try {
      const stopping = web.portal.stop()
      const health = await waitFor(async () => {
        const response = await fetch(`${web.base}/api/v1/health`).catch(() => undefined)
        return response?.status === 503 ? response : undefined
      }, { what: "health to answer 503" })
      expect(await health.json()).toEqual({ error: { code: "shutting_down", message: "Portal is shutting down" } })
      const begun = Date.now()
      await stopping
      // The drain takes the grace period; the open stream adds nothing to it.
      expect(Date.now() - begun).toBeLessThan(2500)
    } finally {
      process.env.PORTAL_SHUTDOWN_GRACE_MS = grace
    }
  })
})
