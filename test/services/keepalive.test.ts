/** TCP keepalive parameters through the addon, checked against what the kernel holds for a loopback connection. */
import { once } from "node:events"
import { closeSync, openSync, readdirSync } from "node:fs"
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { loadNativeAddon, type NativeAddon } from "../../src/services/native/addon.js"
import { applyKeepalive, applyToListener, keepaliveSupport } from "../../src/services/native/keepalive.js"

const loaded = loadNativeAddon()
const support = keepaliveSupport()

it("is fully supported on Linux", () => {
  if (process.platform === "linux") expect(support).toEqual({ full: true })
  else expect(support.full).toBe(false)
})

const servers: Array<Server> = []
const sockets: Array<Socket> = []
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy()
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))))
})

/** Both ends of a loopback connection. */
const connection = async (): Promise<{ client: Socket; accepted: Socket }> => {
  const server = createServer()
  servers.push(server)
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const accepted = once(server, "connection") as Promise<[Socket]>
  const client = connect((server.address() as AddressInfo).port, "127.0.0.1")
  sockets.push(client)
  await once(client, "connect")
  const [socket] = await accepted
  sockets.push(socket)
  return { client, accepted: socket }
}

const fdOf = (socket: Socket): number => (socket as unknown as { _handle: { fd: number } })._handle.fd

const unavailable = "addon" in loaded ? undefined : loaded.reason
describe.skipIf(unavailable !== undefined)(
  unavailable === undefined ? "keepalive" : `keepalive (skipped: ${unavailable})`,
  () => {
    const addon = (loaded as { addon: NativeAddon }).addon

    it("sets idle, interval and count on both ends of a connection", async () => {
      const { client, accepted } = await connection()
      for (const socket of [client, accepted]) {
        expect(addon.getKeepAliveDiagnostic(fdOf(socket)).enabled).toBe(false)
        expect(applyKeepalive(socket, { idleMs: 30_000, intervalMs: 10_000, count: 3 })).toBe("full")
        expect(addon.getKeepAliveDiagnostic(fdOf(socket))).toEqual({ enabled: true, idle: 30, interval: 10, count: 3, noDelay: false })
      }
    })

    it("rounds to whole seconds upwards, at least 1", async () => {
      const { client } = await connection()
      expect(applyKeepalive(client, { idleMs: 1500, intervalMs: 1, count: 1 })).toBe("full")
      expect(addon.getKeepAliveDiagnostic(fdOf(client))).toEqual({ enabled: true, idle: 2, interval: 1, count: 1, noDelay: false })
    })

    it("sets values over the kernel's limits at those limits, the others as given", async () => {
      const { client } = await connection()
      // Linux caps the probe count at 127 and the times at 32767 s: refused, one would take the others down with it.
      expect(applyKeepalive(client, { idleMs: 40_000_000, intervalMs: 10_000, count: 1000 })).toBe("full")
      expect(addon.getKeepAliveDiagnostic(fdOf(client))).toMatchObject({ enabled: true, idle: 32767, interval: 10, count: 127 })
    })

    it("falls back to Node's idle time for a socket without an fd yet", async () => {
      const server = createServer()
      servers.push(server)
      server.listen(0, "127.0.0.1")
      await once(server, "listening")
      const client = connect((server.address() as AddressInfo).port, "127.0.0.1")
      sockets.push(client)
      expect(applyKeepalive(client, { idleMs: 30_000, intervalMs: 10_000, count: 3 })).toBe("idle_only")
      await once(client, "connect")
      expect(addon.getKeepAliveDiagnostic(fdOf(client))).toMatchObject({ enabled: true, idle: 30 })
    })

    it("sets TCP_NODELAY", async () => {
      const { client } = await connection()
      expect(addon.getKeepAliveDiagnostic(fdOf(client)).noDelay).toBe(false)
      addon.setNoDelay(fdOf(client))
      expect(addon.getKeepAliveDiagnostic(fdOf(client)).noDelay).toBe(true)
    })

    it("sets a listening socket so that the sockets it accepts inherit TCP_NODELAY and keepalive", async () => {
      const server = createServer()
      servers.push(server)
      const params = { idleMs: 45_000, intervalMs: 7_000, count: 4 }
      expect(applyToListener(server, params)).toBe(false) // not listening yet: no socket
      server.listen(0, "127.0.0.1")
      await once(server, "listening")
      expect(applyToListener(server, params)).toBe(true)
      const accepted = once(server, "connection") as Promise<[Socket]>
      const client = connect((server.address() as AddressInfo).port, "127.0.0.1")
      sockets.push(client)
      const [socket] = await accepted
      sockets.push(socket)
      expect(addon.getKeepAliveDiagnostic(fdOf(socket))).toEqual({ enabled: true, idle: 45, interval: 7, count: 4, noDelay: true })
      // The connecting side is not the listener's: it keeps the defaults.
      expect(addon.getKeepAliveDiagnostic(fdOf(client))).toMatchObject({ enabled: false, noDelay: false })
      // More than the kernel's 127 probes is set at 127.
      expect(applyToListener(server, { ...params, count: 1000 })).toBe(true)
      const next = once(server, "connection") as Promise<[Socket]>
      sockets.push(connect((server.address() as AddressInfo).port, "127.0.0.1"))
      const [later] = await next
      sockets.push(later)
      expect(addon.getKeepAliveDiagnostic(fdOf(later))).toEqual({ enabled: true, idle: 45, interval: 7, count: 127, noDelay: true })
    })

    it("throws a TypeError for bad arguments", () => {
      const bad: Array<Array<unknown>> = [
        [],
        [0, 30, 10],
        ["3", 30, 10, 3],
        [-1, 30, 10, 3],
        [3, 0, 10, 3],
        [3, 30, 1.5, 3],
        [3, 30, 10, Number.NaN],
        [3, 30, 10, 2 ** 40],
        [3, 30, 10, undefined]
      ]
      const setKeepAlive = addon.setKeepAlive as (...args: Array<unknown>) => void
      for (const args of bad) expect(() => setKeepAlive(...args), JSON.stringify(args)).toThrow(TypeError)
      const setNoDelay = addon.setNoDelay as (...args: Array<unknown>) => void
      for (const args of [[], [-1], ["3"], [1.5]]) expect(() => setNoDelay(...args), JSON.stringify(args)).toThrow(TypeError)
      const getKeepAliveDiagnostic = addon.getKeepAliveDiagnostic as (...args: Array<unknown>) => unknown
      expect(() => getKeepAliveDiagnostic()).toThrow(TypeError)
      expect(() => getKeepAliveDiagnostic({})).toThrow(TypeError)
    })

    it("throws an Error with the errno name for a closed fd or a file", () => {
      // Far above every open fd: the kernel hands out the lowest free number, so nothing opens it meanwhile.
      const closed = Math.max(...readdirSync("/proc/self/fd").map(Number)) + 1000
      const thrown = (() => {
        try {
          addon.setKeepAlive(closed, 30, 10, 3)
        } catch (error) {
          return error
        }
        return undefined
      })()
      expect(thrown).toBeInstanceOf(Error)
      expect(thrown).not.toBeInstanceOf(TypeError)
      expect(thrown).toMatchObject({ code: "EBADF", message: expect.stringContaining("EBADF") })
      expect(() => addon.getKeepAliveDiagnostic(closed)).toThrow(expect.objectContaining({ code: "EBADF" }))
      expect(() => addon.setNoDelay(closed)).toThrow(expect.objectContaining({ code: "EBADF" }))
      const file = openSync("/dev/null", "r")
      try {
        expect(() => addon.setKeepAlive(file, 30, 10, 3)).toThrow(expect.objectContaining({ code: "ENOTSOCK" }))
      } finally {
        closeSync(file)
      }
    })
  }
)
