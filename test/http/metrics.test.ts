/**
 * `GET /api/v1/metrics`: the telemetry metrics in Prometheus' text format, with the API key, when `[telemetry]` is
 * enabled (here with no endpoint: scraped, not pushed); a 401 without the key, a 404 with telemetry off.
 */
import { describe, expect, it } from "vitest"
import { ping, startBackend } from "../peers/minecraft.js"
import { startWebPortal } from "../helpers/web.js"

describe("GET /api/v1/metrics", () => {
  it("serves the metrics in Prometheus' text format with the key, and nothing without it", async () => {
    const backend = await startBackend("lobby")
    const web = await startWebPortal({
      proxy: `worker_threads = 1\n[telemetry]\nenabled = true\n`,
      servers: { "lobby.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]` }
    })
    await ping(web.portal.port, "mc.example.com")
    await ping(web.portal.port, "mc.example.com")

    const response = await web.request("/api/v1/metrics")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/)
    const text = await response.text()
    expect(text).toMatch(/^# HELP portal_connections_total /m)
    expect(text).toMatch(/^# TYPE portal_connections_total counter$/m)
    expect(text).toMatch(/^portal_connections_total\{portal_outcome="status"\} 2$/m)
    expect(text).toMatch(/^portal_handshakes_total\{minecraft_handshake_next_state="status"\} 2$/m)
    expect(text).toMatch(/^portal_server_state\{portal_server="lobby",portal_server_state="online"\} 1$/m)
    expect(text).toMatch(/^portal_handshake_duration_count 2$/m)
    expect(text).toMatch(/^portal_handshake_duration_bucket\{le="\+Inf"\} 2$/m)
    expect(text).toMatch(/^portal_workers 1$/m)

    const anonymous = await fetch(`${web.base}/api/v1/metrics`)
    expect(anonymous.status).toBe(401)
    const wrongKey = await web.request("/api/v1/metrics", { headers: { authorization: "Bearer wrong-key-0123456789" } })
    expect(wrongKey.status).toBe(401)
  })

  it("is a 404 with telemetry off", async () => {
    const web = await startWebPortal({ proxy: "worker_threads = 1" })
    const response = await web.request("/api/v1/metrics")
    expect(response.status).toBe(404)
    expect(await response.json()).toMatchObject({ error: { code: "not_found" } })
  })
})
