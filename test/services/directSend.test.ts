/** The addon's send(2), which the passthrough relay uses for small packets, on real loopback sockets. */
import { once } from "node:events"
import { closeSync, openSync, readdirSync } from "node:fs"
import { type AddressInfo, connect, createServer, type Socket } from "node:net"
import { constants } from "node:os"
import { afterEach, describe, expect, it } from "vitest"
import { loadNativeAddon, type NativeAddon } from "../../src/services/native/addon.js"
import { waitFor } from "../helpers/wait.js"

const loaded = loadNativeAddon()
const sockets: Array<Socket> = []
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy()
})

const connection = async (): Promise<{ client: Socket; accepted: Socket }> => {
  const server = createServer()
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const accepted = once(server, "connection") as Promise<[Socket]>
  const client = connect((server.address() as AddressInfo).port, "127.0.0.1")
  await once(client, "connect")
  const [socket] = await accepted
  server.close()
  sockets.push(client, socket)
  return { client, accepted: socket }
}

const fdOf = (socket: Socket): number => (socket as unknown as { _handle: { fd: number } })._handle.fd

const unavailable = "addon" in loaded ? undefined : loaded.reason
describe.skipIf(unavailable !== undefined)(unavailable === undefined ? "send" : `send (skipped: ${unavailable})`, () => {
  const addon = (loaded as { addon: NativeAddon }).addon

  it("sends the first `length` bytes of a view and says how many the kernel took", async () => {
    const { client, accepted } = await connection()
    const received: Array<Buffer> = []
    accepted.on("data", (chunk: Buffer) => received.push(chunk))
    const bytes = Buffer.from("0123456789abcdef").subarray(4)
    expect(addon.send(fdOf(client), bytes, 6)).toBe(6)
    await waitFor(() => Buffer.concat(received).length >= 6 || undefined, { what: "the bytes" })
    expect(Buffer.concat(received).toString()).toBe("456789")
  })

  it("returns 0 once the socket's buffers are full, and never blocks", async () => {
    const { client, accepted } = await connection()
    accepted.pause()
    const chunk = Buffer.alloc(256 * 1024)
    let last = -1
    // Bounded: the loopback buffers hold a few MiB at most.
    for (let i = 0; i < 4096 && last !== 0; i++) last = addon.send(fdOf(client), chunk, chunk.length)
    expect(last).toBe(0)
  })

  it("returns -errno for a closed descriptor or one that is not a socket, and throws TypeError for bad arguments", () => {
    const closed = Math.max(...readdirSync("/proc/self/fd").map(Number)) + 1000
    expect(addon.send(closed, Buffer.alloc(1), 1)).toBe(-constants.errno.EBADF)
    const file = openSync("/dev/null", "r")
    try {
      expect(addon.send(file, Buffer.alloc(1), 1)).toBe(-constants.errno.ENOTSOCK)
    } finally {
      closeSync(file)
    }
    const send = addon.send as (...args: Array<unknown>) => number
    for (const args of [[], [1, Buffer.alloc(1)], [1, Buffer.alloc(1), 2], [-1, Buffer.alloc(1), 1], [1, "x", 1]])
      expect(() => send(...args), JSON.stringify(args)).toThrow(TypeError)
  })
})
