/**
 * `[telemetry]` against real OTLP receivers in this process (test/peers/otlpReceiver.ts: @grpc/grpc-js serving the
 * official OTLP services, and OTLP/HTTP with protobuf bodies, both decoded with the official opentelemetry-proto
 * definitions). A scripted session (a real client pings, logs in, chats, leaves; a login to a dead backend; a banned
 * player) gives the spans with their parent links and attributes and the metric points, on one thread and on two
 * workers; sampling keeps the ping ratio and every login; a receiver that stops leaves connections alone and is
 * reported once.
 */
import { Effect } from "effect"
import mc from "minecraft-protocol"
import { createServer } from "node:http"
import * as net from "node:net"
import type { AddressInfo } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { BanStore } from "../../src/services/BanStore.js"
import { encodeFrame } from "../../src/protocol/framing.js"
import { freePort } from "../helpers/net.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { waitFor } from "../helpers/wait.js"
import { join, ping, reasonText, startBackend } from "../peers/minecraft.js"
import { type OtlpReceiver, type ReceivedSpan, startGrpcReceiver, startHttpReceiver } from "../peers/otlpReceiver.js"
import { exchange, legacyKickText, ping16 } from "../peers/raw.js"

const receivers: Array<OtlpReceiver> = []
afterEach(async () => {
  for (const receiver of receivers.splice(0)) await receiver.stop()
})

const receiver = async (protocol: "grpc" | "http") => {
  const started = protocol === "grpc" ? await startGrpcReceiver() : await startHttpReceiver()
  receivers.push(started)
  return started
}


const telemetryToml = (target: OtlpReceiver, extra = "", exportInterval = "300ms") => `
[telemetry]
enabled = true
endpoint = "${target.endpoint}"
protocol = "${target.protocol}"
${extra}
[telemetry.metrics]
export_interval = "${exportInterval}"
[telemetry.resource]
service_name = "portal-under-test"
service_version = "9.9.9"
`

/** A receiver, a backend for mc.example.com, and Portal exporting to the receiver (traces at `samplingRatio`). */
const lobbyPortal = async (options: {
  readonly protocol: "grpc" | "http"
  readonly workers?: number
  readonly samplingRatio?: number
  readonly exportInterval?: string
  readonly hold?: boolean
}) => {
  const target = await receiver(options.protocol)
  const backend = await startBackend("lobby", { hold: options.hold ?? false })
  const traces = options.samplingRatio === undefined ? "" : `[telemetry.traces]\nsampling_ratio = ${options.samplingRatio.toFixed(2)}`
  const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = ${options.workers ?? 1}\n${telemetryToml(target, traces, options.exportInterval)}`, {
    "lobby.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
  })
  return { target, backend, portal: await startPortal(dir.configFile) }
}

/** Joins as `username`, says something in chat once in play, then leaves. */
const joinChatLeave = (port: number, username: string) =>
  new Promise<void>((resolve, reject) => {
    const client = mc.createClient({ host: "127.0.0.1", port, fakeHost: "mc.example.com", username, auth: "offline", version: "1.20.4", hideErrors: true, keepAlive: false })
    const timer = setTimeout(() => reject(new Error(`${username} did not get into play`)), 10_000)
    client.on("error", () => {})
    client.once("keep_alive", () => {
      client.chat("hello through the proxy")
      setTimeout(() => {
        clearTimeout(timer)
        client.end()
        resolve()
      }, 200)
    })
    client.on("kick_disconnect", (packet: { reason: unknown }) => reject(new Error(`kicked: ${reasonText(packet.reason)}`)))
  })

const rootsOf = (spans: ReadonlyArray<ReceivedSpan>) => spans.filter((span) => span.parentSpanId === "")
const childrenOf = (spans: ReadonlyArray<ReceivedSpan>, root: ReceivedSpan) =>
  spans.filter((span) => span.traceId === root.traceId && span.parentSpanId === root.spanId)

/** The scripted session: a ping, a login that chats and leaves, a login to a dead backend, a banned player. */
const scriptedSession = async (workers: 1 | 2, protocol: "grpc" | "http") => {
  const target = await receiver(protocol)
  const lobby = await startBackend("lobby", { hold: true })
  const dead = await freePort()
  const dir = makeConfigDir(`bind = "127.0.0.1:0"\nworker_threads = ${workers}\nconnect_timeout = "1s"\n${telemetryToml(target, "[telemetry.traces]\nsampling_ratio = 1.0")}`, {
    "lobby.toml": `domains = ["mc.example.com"]\naddresses = ["127.0.0.1:${lobby.port}"]`,
    "dead.toml": `domains = ["dead.example.com"]\naddresses = ["127.0.0.1:${dead}"]`
  })
  const portal = await startPortal(dir.configFile)
  await portal.run(Effect.flatMap(BanStore, (store) => store.add({ target: { type: "username", value: "mallory" }, reason: "Griefing", source: "test" })))

  expect(reasonText((await ping(portal.port, "mc.example.com")).description)).toBe("motd of lobby")
  await joinChatLeave(portal.port, "alice")
  const deadJoin = await join(portal.port, "dead.example.com", { username: "bob" })
  expect(deadJoin._tag).toBe("Kicked")
  const banned = await join(portal.port, "mc.example.com", { username: "mallory" })
  expect(banned).toMatchObject({ _tag: "Kicked" })

  const store = target.store
  // Four connections, each a root span; the relayed one ends when alice's session does.
  await waitFor(() => rootsOf(store.spans).length >= 4, { timeoutMs: 10_000, what: "four connection traces" })
  const roots = rootsOf(store.spans)
  expect(roots).toHaveLength(4)
  for (const root of roots) {
    expect(root.name).toBe("minecraft.connection")
    expect(root.kind).toBe("SPAN_KIND_SERVER")
    expect(root.attributes).toMatchObject({ "client.address": "127.0.0.1", "network.transport": "tcp" })
    expect(root.resource).toMatchObject({ "service.name": "portal-under-test", "service.version": "9.9.9" })
    expect(typeof root.resource["service.instance.id"]).toBe("string")
    expect(typeof root.resource["host.name"]).toBe("string")
    expect(root.end).toBeGreaterThanOrEqual(root.start)
    // Every child is inside its root, in the same trace.
    for (const child of childrenOf(store.spans, root)) {
      expect(child.start).toBeGreaterThanOrEqual(root.start - 1)
      expect(child.end).toBeLessThanOrEqual(root.end + 1)
    }
    if (workers === 2) expect([1, 2]).toContain(root.attributes["portal.worker"])
    else expect(root.attributes["portal.worker"]).toBe(0)
  }
  // Every span belongs to one of the four traces, under its root.
  expect(store.spans.every((span) => span.parentSpanId === "" || roots.some((root) => root.spanId === span.parentSpanId))).toBe(true)

  const byOutcome = (outcome: string, player?: string) =>
    roots.find((root) => root.attributes["portal.outcome"] === outcome && (player === undefined || root.attributes["minecraft.player.name"] === player))!

  const status = byOutcome("status")
  expect(status.attributes).toMatchObject({
    "server.address": "mc.example.com",
    "minecraft.handshake.next_state": "status",
    "portal.server": "lobby",
    "portal.proxy_mode": "passthrough"
  })
  const statusChildren = childrenOf(store.spans, status)
  expect(statusChildren.map((span) => span.name).sort()).toEqual(["minecraft.handshake", "minecraft.status"])
  expect(statusChildren.find((span) => span.name === "minecraft.status")!.attributes).toMatchObject({ "portal.server.state": "online" })
  expect(["backend", "cache"]).toContain(statusChildren.find((span) => span.name === "minecraft.status")!.attributes["portal.status.source"])

  const relayed = byOutcome("relayed", "alice")
  expect(relayed.attributes).toMatchObject({ "minecraft.handshake.next_state": "login", "portal.server": "lobby", "minecraft.protocol_version": 765 })
  const relayedChildren = childrenOf(store.spans, relayed)
  expect(relayedChildren.map((span) => span.name).sort()).toEqual([
    "minecraft.handshake",
    "minecraft.session",
    "portal.admission",
    "portal.backend.connect",
    "portal.forwarding"
  ])
  const connect = relayedChildren.find((span) => span.name === "portal.backend.connect")!
  expect(connect.kind).toBe("SPAN_KIND_CLIENT")
  expect(connect.attributes).toMatchObject({ "server.address": "127.0.0.1", "server.port": lobby.port, "portal.connect.result": "ok" })
  expect(relayedChildren.find((span) => span.name === "portal.admission")!.attributes).toMatchObject({ "portal.admission.result": "admitted" })
  expect(relayedChildren.find((span) => span.name === "portal.forwarding")!.attributes).toMatchObject({ "portal.forwarding.mode": "none" })
  const session = relayedChildren.find((span) => span.name === "minecraft.session")!
  expect(session.attributes["portal.session.closed_by"]).toBe("client_closed")
  expect(session.attributes["portal.session.bytes_in"]).toBeGreaterThan(0)
  expect(session.attributes["portal.session.bytes_out"]).toBeGreaterThan(0)
  expect(session.end - session.start).toBeGreaterThanOrEqual(150)

  const unreachable = byOutcome("refused", "bob")
  expect(unreachable.attributes).toMatchObject({ "portal.server": "dead", "portal.refusal.reason": "backend_unreachable" })
  expect(unreachable.status.code).toBe("STATUS_CODE_ERROR")
  const failedConnect = childrenOf(store.spans, unreachable).filter((span) => span.name === "portal.backend.connect")
  expect(failedConnect).toHaveLength(1)
  expect(failedConnect[0]!.attributes).toMatchObject({ "server.port": dead, "portal.connect.result": "failed", "error.type": "ECONNREFUSED" })
  expect(failedConnect[0]!.status.code).toBe("STATUS_CODE_ERROR")

  const ban = byOutcome("refused", "mallory")
  expect(ban.attributes["portal.refusal.reason"]).toBe("banned")
  expect(childrenOf(store.spans, ban).find((span) => span.name === "portal.admission")!.attributes).toMatchObject({ "portal.admission.result": "banned" })
  expect(childrenOf(store.spans, ban).some((span) => span.name === "portal.backend.connect")).toBe(false)

  // Metrics: the points of a push after everything above.
  const pushes = store.requests.metrics
  await waitFor(() => store.requests.metrics >= pushes + 2, { timeoutMs: 5_000, what: "two more metric pushes" })
  const value = (metric: string, attributes: Record<string, unknown> = {}) => store.latest(metric, attributes)?.value
  expect(value("portal.connections", { "portal.outcome": "relayed" })).toBe(1)
  expect(value("portal.connections", { "portal.outcome": "status" })).toBe(1)
  expect(value("portal.connections", { "portal.outcome": "refused" })).toBe(2)
  expect(value("portal.connections.accepted")).toBe(4)
  expect(value("portal.connections.active")).toBe(0)
  expect(value("portal.handshakes", { "minecraft.handshake.next_state": "status" })).toBe(1)
  expect(value("portal.handshakes", { "minecraft.handshake.next_state": "login" })).toBe(3)
  expect(value("portal.refusals", { "portal.refusal.reason": "banned" })).toBe(1)
  expect(value("portal.refusals", { "portal.refusal.reason": "backend_unreachable" })).toBe(1)
  expect(value("portal.refusals", { "portal.refusal.reason": "rate_limited" })).toBe(0)
  expect(value("portal.players.online", { "portal.server": "lobby" })).toBe(0)
  expect(value("portal.relay.bytes", { "portal.server": "lobby", "network.io.direction": "receive" })).toBeGreaterThan(0)
  expect(value("portal.relay.bytes", { "portal.server": "lobby", "network.io.direction": "transmit" })).toBeGreaterThan(0)
  expect(store.latest("portal.relay.bytes")!.monotonic).toBe(true)
  expect(store.latest("portal.relay.bytes")!.unit).toBe("By")
  expect(value("portal.server.state", { "portal.server": "lobby", "portal.server.state": "online" })).toBe(1)
  expect(value("portal.server.state", { "portal.server": "lobby", "portal.server.state": "sleeping" })).toBe(0)
  expect(value("portal.backend.healthy", { "portal.server": "lobby", "server.port": lobby.port })).toBe(1)
  expect(value("portal.workers")).toBe(workers)
  const connectOk = store.latest("portal.backend.connect.duration", { "portal.connect.result": "ok" })!.histogram!
  expect(connectOk.count).toBe(1)
  expect(connectOk.counts.reduce((sum, count) => sum + count, 0)).toBe(1)
  expect(connectOk.bounds.length + 1).toBe(connectOk.counts.length)
  expect(store.latest("portal.backend.connect.duration", { "portal.connect.result": "failed" })!.histogram!.count).toBe(1)
  const handshakes = store.latest("portal.handshake.duration")!
  expect(handshakes.unit).toBe("s")
  expect(handshakes.histogram!.count).toBe(4)
  expect(handshakes.histogram!.sum).toBeGreaterThan(0)
  expect(handshakes.resource).toMatchObject({ "service.name": "portal-under-test" })
}

describe("telemetry: traces and metrics over OTLP", () => {
  it("a scripted session on one thread, over OTLP/gRPC", () => scriptedSession(1, "grpc"), 30_000)
  it("a scripted session on one thread, over OTLP/HTTP", () => scriptedSession(1, "http"), 30_000)
  it("a scripted session on two worker threads, over OTLP/gRPC", () => scriptedSession(2, "grpc"), 30_000)

  it("samples pings at sampling_ratio and traces every login at any ratio", async () => {
    const { target, portal } = await lobbyPortal({ protocol: "http", samplingRatio: 0.25 })
    // 400 pings: a raw status request each (handshake, status request), answered from the cache.
    const handshake = encodeFrame(0x00, Buffer.concat([Buffer.from([0xfd, 0x05, 14]), Buffer.from("mc.example.com"), Buffer.from([0x63, 0xdd, 0x01])]), -1)
    const statusRequest = encodeFrame(0x00, Buffer.alloc(0), -1)
    const pingOnce = () =>
      new Promise<void>((resolve) => {
        const socket = net.connect(portal.port, "127.0.0.1", () => socket.write(Buffer.concat([handshake, statusRequest])))
        socket.once("data", () => socket.destroy())
        socket.on("close", () => resolve())
        socket.on("error", () => resolve())
      })
    for (let batch = 0; batch < 400; batch += 4) await Promise.all(Array.from({ length: 4 }, pingOnce))
    // Three at a time, so that with the last pings' connections still closing they stay within the eight handshakes in
    // progress one address may have.
    const logins = [
      ...(await Promise.all(Array.from({ length: 3 }, (_, i) => join(portal.port, "mc.example.com", { username: `p${i}` })))),
      ...(await Promise.all(Array.from({ length: 3 }, (_, i) => join(portal.port, "mc.example.com", { username: `p${i + 3}` }))))
    ]
    expect(logins.every((result) => result._tag === "Kicked")).toBe(true)

    const store = target.store
    await waitFor(() => rootsOf(store.spans).filter((root) => root.attributes["minecraft.handshake.next_state"] === "login").length >= 6, {
      timeoutMs: 10_000,
      what: "the six login traces"
    })
    // Give the last pings' spans a batch to arrive.
    await new Promise((resolve) => setTimeout(resolve, 1500))
    const pings = rootsOf(store.spans).filter((root) => root.attributes["minecraft.handshake.next_state"] === "status")
    // Binomial(400, 0.25): mean 100, standard deviation 8.7; 4.5 of them either side.
    expect(pings.length).toBeGreaterThanOrEqual(61)
    expect(pings.length).toBeLessThanOrEqual(139)
    expect(rootsOf(store.spans).filter((root) => root.attributes["minecraft.handshake.next_state"] === "login")).toHaveLength(6)
  }, 60_000)

  it("a 1.6 legacy ping's trace names its host, port and protocol, and the server it was answered for", async () => {
    const { target, portal } = await lobbyPortal({ protocol: "http", samplingRatio: 1 })
    expect(legacyKickText((await exchange(portal.port, [ping16("mc.example.com", 25570)])).received)?.split("\0")[3]).toBe("motd of lobby")
    await waitFor(() => rootsOf(target.store.spans).length >= 1, { timeoutMs: 10_000, what: "the ping's trace" })
    expect(rootsOf(target.store.spans)[0]!.attributes).toMatchObject({
      "minecraft.handshake.next_state": "legacy_status",
      "minecraft.protocol_version": 78,
      "server.address": "mc.example.com",
      "server.port": 25570,
      "portal.server": "lobby",
      "portal.outcome": "status"
    })
  })

  it("a connection closed before its first byte is `closed`, not an error; one gone mid-handshake is an error", async () => {
    const { target, portal } = await lobbyPortal({ protocol: "http", samplingRatio: 1 })
    const closeAfter = (bytes: Buffer) =>
      new Promise<void>((resolve) => {
        const socket = net.connect(portal.port, "127.0.0.1", () => socket.end(bytes))
        socket.on("close", () => resolve())
        socket.on("error", () => resolve())
      })
    await closeAfter(Buffer.alloc(0))
    await waitFor(() => rootsOf(target.store.spans).length >= 1, { timeoutMs: 10_000, what: "the silent connection's trace" })
    // A handshake frame announcing 16 bytes, and only 3 of them sent.
    await closeAfter(Buffer.from([0x10, 0x00, 0xfd, 0x05]))
    await waitFor(() => rootsOf(target.store.spans).length >= 2, { timeoutMs: 10_000, what: "the cut handshake's trace" })
    const [silent, cut] = rootsOf(target.store.spans)
    expect(silent!.attributes["portal.outcome"]).toBe("closed")
    expect(silent!.status.code).not.toBe("STATUS_CODE_ERROR")
    expect(cut!.attributes["portal.outcome"]).toBe("error")
    expect(cut!.status.code).toBe("STATUS_CODE_ERROR")
    await waitFor(() => target.store.latest("portal.connections", { "portal.outcome": "error" })?.value === 1, {
      timeoutMs: 10_000,
      what: "one connection counted as an error"
    })
  })

  it("exports what is pending as Portal stops: the last traces and metric points", async () => {
    // Metrics every minute: only the push at shutdown can bring them before the test ends.
    const { target, portal } = await lobbyPortal({ protocol: "grpc", samplingRatio: 1, exportInterval: "1m" })
    expect((await join(portal.port, "mc.example.com", { username: "last" }))._tag).toBe("Kicked")
    // A batch waits up to a second for more records: stopping now leaves the trace pending.
    const started = Date.now()
    await portal.stop()
    expect(Date.now() - started).toBeLessThan(6_000)
    expect(rootsOf(target.store.spans).map((root) => root.attributes["minecraft.player.name"])).toEqual(["last"])
    expect(target.store.latest("portal.connections", { "portal.outcome": "refused" })?.value).toBe(0)
    expect(target.store.latest("portal.handshakes", { "minecraft.handshake.next_state": "login" })?.value).toBe(1)
  }, 30_000)

  it("sessions still open when Portal stops are ended, and their traces exported, on one thread as on workers", async () => {
    for (const workers of [1, 2]) {
      const { target, backend, portal } = await lobbyPortal({ protocol: "http", workers, hold: true })
      for (const username of ["stay0", "stay1"]) expect((await join(portal.port, "mc.example.com", { username }))._tag).toBe("Joined")
      // The grace (300 ms here) runs out with both still playing: the shutdown ends them.
      await portal.stop()
      const sessions = target.store.spans.filter((span) => span.name === "minecraft.session")
      expect(sessions.map((span) => span.attributes["portal.session.closed_by"])).toEqual(["ended", "ended"])
      expect(rootsOf(target.store.spans).map((root) => root.attributes["minecraft.player.name"]).sort()).toEqual(["stay0", "stay1"])
      // The last metrics push, made as Portal stops, counts the connections the shutdown closed as closed.
      expect(target.store.latest("portal.connections.active")?.value).toBe(0)
      expect(target.store.latest("portal.players.online", { "portal.server": "lobby" })?.value).toBe(0)
      await backend.close()
    }
  }, 40_000)

  it("a receiver that stops: connections go on as before, and the failure is logged once", async () => {
    const { target, portal } = await lobbyPortal({ protocol: "http", samplingRatio: 1, hold: true })
    const first = await join(portal.port, "mc.example.com", { username: "before" })
    expect(first._tag).toBe("Joined")
    if (first._tag === "Joined") first.leave()
    await waitFor(() => rootsOf(target.store.spans).length >= 1, { timeoutMs: 5_000, what: "the first trace" })
    await target.stop()

    // With nobody receiving, logins and pings are served as quickly as before.
    for (let round = 0; round < 5; round++) {
      const started = Date.now()
      const player = await join(portal.port, "mc.example.com", { username: `after${round}` })
      expect(player._tag).toBe("Joined")
      if (player._tag === "Joined") player.leave()
      expect(reasonText((await ping(portal.port, "mc.example.com")).description)).toBe("motd of lobby")
      expect(Date.now() - started).toBeLessThan(1500)
    }
    // Metric pushes every 300 ms and the span batches fail; one line says so.
    await portal.waitForLog(/telemetry: exporting (traces|metrics) to http:\/\/127\.0\.0\.1:\d+ failed/, 8_000)
    await new Promise((resolve) => setTimeout(resolve, 2_000))
    expect(portal.logs.filter((line) => /telemetry: exporting \w+ to .* failed/.test(line))).toHaveLength(1)
  }, 30_000)

  it("a collector that never answers: the metrics export that timed out is reported, though the SDK only tells its diagnostics", async () => {
    const silent = createServer(() => {}) // takes every request and answers none
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    const port = (silent.address() as AddressInfo).port
    try {
      const dir = makeConfigDir(
        `bind = "127.0.0.1:0"\nworker_threads = 1\n[telemetry]\nenabled = true\nendpoint = "http://127.0.0.1:${port}"\nprotocol = "http"\n[telemetry.traces]\nenabled = false\n[telemetry.metrics]\nexport_interval = "300ms"`
      )
      const portal = await startPortal(dir.configFile)
      await portal.waitForLog(/WARN telemetry: exporting metrics to http:\/\/127\.0\.0\.1:\d+ failed: PeriodicExportingMetricReader: metrics export timed out after 300ms/, 8_000)
    } finally {
      silent.closeAllConnections()
      silent.close()
    }
  }, 30_000)
})
