/** [active_health] on a running proxy: probes, the Balancer's order, the unreachable state and the concurrency bound. */
import { Effect } from "effect"
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { Balancer } from "../../src/services/Balancer.js"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { freePort } from "../helpers/net.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { startPortal } from "../helpers/portal.js"
import { waitFor } from "../helpers/wait.js"
import { join, ping, reasonText, startBackend } from "../peers/minecraft.js"
import { GOOD_STATUS, startStatusBackend, statusAnswer } from "../peers/statusBackend.js"

const servers: Array<net.Server> = []
const accepted = new Set<net.Socket>()
afterEach(async () => {
  for (const socket of accepted) socket.destroy()
  accepted.clear()
  await Promise.all(servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
})

/** A TCP server that accepts and never answers: up for a tcp probe, down for a status_ping one. */
const blackHole = async (port = 0, host = "127.0.0.1") => {
  const open = new Set<net.Socket>()
  let peak = 0
  let count = 0
  const server = net.createServer((socket) => {
    count++
    open.add(socket)
    accepted.add(socket)
    peak = Math.max(peak, open.size)
    socket.on("error", () => {})
    socket.on("close", () => open.delete(socket))
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(port, host, resolve))
  return {
    port: (server.address() as net.AddressInfo).port,
    peak: () => peak,
    /** Connections accepted so far (each tcp probe is one). */
    accepted: () => count,
    close: () => new Promise<void>((resolve) => {
      for (const socket of open) socket.destroy()
      server.close(() => resolve())
    })
  }
}

const health = (kind: string, extra = "") =>
  `[active_health]\nenabled = true\nkind = "${kind}"\ninterval = "200ms"\nunhealthy_interval = "200ms"\ntimeout = "300ms"\n${extra}`

const statusOf = (portal: Awaited<ReturnType<typeof startPortal>>, serverId: string) =>
  portal.run(
    Effect.gen(function* () {
      const server = (yield* (yield* ConfigStore).get).servers.get(serverId)!
      return yield* (yield* Balancer).status(server)
    })
  )

describe("active health checks", () => {
  it("tcp probes mark an address down when it stops accepting and up when it is back", { timeout: 45_000 }, async () => {
    // On a loopback address of its own, on a port outside the kernel's ephemeral range: while it is closed, no other
    // test's listener can take it. The waits allow for a loaded machine (the probes run every 200 ms).
    const host = "127.0.0.61"
    const hole = await blackHole(await freePort(host), host)
    const port = hole.port
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n${health("tcp")}`, { "s.toml": `domains = ["s.example.com"]\naddresses = ["${host}:${port}"]` })
    const portal = await startPortal(dir.configFile)
    // Two probes passed: the loop runs and has set its verdict.
    await waitFor(() => hole.accepted() >= 2, { timeoutMs: 10_000, what: "two probes of the listening address" })
    expect((await statusOf(portal, "s"))[0]!.healthy).toBe(true)
    await hole.close()
    await waitFor(async () => (await statusOf(portal, "s"))[0]!.healthy === false, { timeoutMs: 15_000, what: "the closed address marked down" }).catch(
      (error: Error) => {
        throw new Error(`${error.message}; probes accepted: ${hole.accepted()}; log:\n${portal.logs.join("\n")}`)
      }
    )
    await portal.waitForLog(/health: s 127\.0\.0\.61:\d+ is down \(ECONNREFUSED\)/)
    // Every address down: the server shows its unreachable MOTD without trying the backend.
    expect(reasonText((await ping(portal.port, "s.example.com")).description)).toMatch(/cannot be reached/)
    await blackHole(port, host)
    await portal.waitForLog(/health: s 127\.0\.0\.61:\d+ is up again/, 15_000)
  })

  it("status_ping probes see a backend that accepts but does not answer; logins go to the healthy address first", async () => {
    const hole = await blackHole()
    const good = await startBackend("good")
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\nconnect_timeout = "5s"\n${health("status_ping")}`, {
      "s.toml": `domains = ["s.example.com"]\naddresses = ["127.0.0.1:${hole.port}", "127.0.0.1:${good.port}"]\n[timeouts]\nread = "3s"`
    })
    const portal = await startPortal(dir.configFile)
    await portal.waitForLog(new RegExp(`health: s 127\\.0\\.0\\.1:${hole.port} is down`))
    // The good backend's first answer may miss the 300 ms probe timeout on a loaded machine: a later probe passes.
    await waitFor(async () => (await statusOf(portal, "s")).map((address) => address.healthy).join() === "false,true", {
      what: "the black hole down and the good backend up"
    })
    // first_available would pick the black hole first; health puts it last.
    expect(await join(portal.port, "s.example.com")).toEqual({ _tag: "Kicked", reason: "kick: good" })
    expect(reasonText((await ping(portal.port, "s.example.com")).description)).toBe("motd of good")
  })

  it("a status_ping probe answered with null or garbage marks the address down; the loop goes on and sees it recover", async () => {
    const backend = await startStatusBackend(statusAnswer("null"))
    const dir = makeConfigDir(`bind = "127.0.0.1:0"\n${health("status_ping")}`, {
      "s.toml": `domains = ["s.example.com"]\naddresses = ["127.0.0.1:${backend.port}"]`
    })
    const portal = await startPortal(dir.configFile)
    const address = `s 127\\.0\\.0\\.1:${backend.port}`
    await portal.waitForLog(new RegExp(`health: ${address} is down \\(not a status answer: expected a JSON object, got null\\)`))
    expect((await statusOf(portal, "s"))[0]!.healthy).toBe(false)
    // Garbage: still down, and the loop keeps probing (more connections arrive).
    backend.answer = Buffer.from("ffffffffff00", "hex")
    const seen = backend.connections()
    await waitFor(() => backend.connections() >= seen + 2, { what: "more probes" })
    expect((await statusOf(portal, "s"))[0]!.healthy).toBe(false)
    // A good answer: up again.
    backend.answer = statusAnswer(JSON.stringify(GOOD_STATUS))
    await portal.waitForLog(new RegExp(`health: ${address} is up again`))
    expect((await statusOf(portal, "s"))[0]!.healthy).toBe(true)
    // Down again with garbage: the reason names the bad frame.
    backend.answer = Buffer.from("ffffffffff00", "hex")
    await portal.waitForLog(new RegExp(`health: ${address} is down \\(not a status response: VarInt longer than 5 bytes\\)`))
    expect(portal.logs.filter((line) => line.includes("failed unexpectedly"))).toEqual([])
  })

  it("a server's override turns probes on for it alone, and max_concurrent bounds probes in flight", async () => {
    const holes = await Promise.all(Array.from({ length: 6 }, () => blackHole()))
    const dir = makeConfigDir(`bind = "127.0.0.1:0"`, {
      "s.toml": [
        `domains = ["s.example.com"]`,
        `addresses = [${holes.map((hole) => `"127.0.0.1:${hole.port}"`).join(", ")}]`,
        `active_health = { enabled = true, kind = "status_ping", interval = "100ms", unhealthy_interval = "100ms", timeout = "400ms", max_concurrent = 2 }`
      ].join("\n"),
      "other.toml": `domains = ["o.example.com"]\naddresses = ["127.0.0.1:1"]`
    })
    const portal = await startPortal(dir.configFile)
    await waitFor(async () => ((await statusOf(portal, "s")).every((a) => !a.healthy) ? true : undefined), { what: "all down" })
    expect(holes.every((hole) => hole.peak() >= 1)).toBe(true)
    // Concurrency: count connections open at the same moment across all six.
    const peak = await peakOpen(holes)
    // Probes of black holes that time out back to back: some are in flight at every look, never more than the bound.
    expect(peak).toBeGreaterThanOrEqual(1)
    expect(peak).toBeLessThanOrEqual(2)
    // The other server has no probes: its address stays healthy although nothing listens there.
    expect((await statusOf(portal, "other"))[0]!.healthy).toBe(true)
  })

  it("the global max_concurrent bounds probes across servers, and a reload of proxy.toml changes the bound", { timeout: 30_000 }, async () => {
    const holes = await Promise.all(Array.from({ length: 6 }, () => blackHole()))
    const server = (name: string, own: typeof holes) =>
      [
        `domains = ["${name}.example.com"]`,
        `addresses = [${own.map((hole) => `"127.0.0.1:${hole.port}"`).join(", ")}]`,
        // Each server alone may have all three of its probes in flight: only the global bound holds them back.
        `active_health = { max_concurrent = 3 }`
      ].join("\n")
    const global = (bound: number) =>
      `bind = "127.0.0.1:0"\n[active_health]\nenabled = true\nkind = "status_ping"\ninterval = "100ms"\nunhealthy_interval = "100ms"\ntimeout = "400ms"\nmax_concurrent = ${bound}\n`
    const dir = makeConfigDir(global(6), { "a.toml": server("a", holes.slice(0, 3)), "b.toml": server("b", holes.slice(3)) })
    const portal = await startPortal(dir.configFile)
    await waitFor(async () => ((await statusOf(portal, "a")).every((a) => !a.healthy) ? true : undefined), { what: "all down" })
    dir.write("proxy.toml", global(1))
    await portal.run(Effect.flatMap(ConfigStore, (store) => store.reloadGlobal))
    // Probes started before the reload finish within their 400 ms timeout.
    await new Promise((resolve) => setTimeout(resolve, 600))
    const peak = await peakOpen(holes)
    expect(peak).toBeGreaterThanOrEqual(1)
    expect(peak).toBeLessThanOrEqual(1)
    expect(portal.logs.filter((line) => line.includes("needs a restart"))).toEqual([])
  })
})

/**
 * Portal's established connections to the given ports, read from /proc/net/tcp: the sockets whose remote port is one
 * of them. Not the listeners' side: when Portal closes a probe, the kernel moves its own socket out of ESTABLISHED in
 * the close call, but a loaded machine can leave the FIN for its softirq thread, and the far side stays ESTABLISHED
 * until then (a full test run once counted 3 probes in flight that way). The kernel writes that file in pieces, and a
 * socket can show up twice when other sockets come and go between two pieces, so each connection (its local and
 * remote address) counts once.
 */
/** The most connections open at once to `holes`, over 20 looks 50 ms apart. */
const peakOpen = async (holes: ReadonlyArray<{ readonly port: number }>): Promise<number> => {
  const samples: Array<number> = []
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    samples.push(await countOpen(holes.map((hole) => hole.port)))
  }
  return Math.max(...samples)
}

const countOpen = async (ports: Array<number>): Promise<number> => {
  const { readFileSync } = await import("node:fs")
  const wanted = new Set(ports.map((port) => port.toString(16).toUpperCase().padStart(4, "0")))
  const established = (): Set<string> => {
    const open = new Set<string>()
    for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/)
      if (fields[3] === "01" && wanted.has(fields[2]?.split(":")[1] ?? "")) open.add(`${fields[1]} ${fields[2]}`)
    }
    return open
  }
  // The kernel lists sockets bucket by bucket, not at one instant: one read can show a probe that is closing and the
  // next that is opening, which were never open together. Two connections in both of two reads in a row were.
  const first = established()
  const second = established()
  return [...first].filter((connection) => second.has(connection)).length
}
