/** Raw TCP peers for what no Minecraft library sends: hand-crafted bytes, PROXY headers, garbage. */
import * as net from "node:net"
import { afterEach } from "vitest"

const sockets: Array<net.Socket> = []
const servers: Array<net.Server> = []
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy()
  await Promise.all(servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
})

export interface Exchange {
  /** Everything the peer sent before closing (or before the timeout). */
  readonly received: Buffer
  /** Whether the peer closed the connection (as opposed to the timeout ending the wait). */
  readonly closed: boolean
}

/**
 * Connects, writes `chunks` (with `gapMs` between them, then a FIN with `end`), and collects the answer until the
 * proxy closes or `timeoutMs` passes.
 */
export const exchange = (
  port: number,
  chunks: ReadonlyArray<Buffer>,
  options: { gapMs?: number; timeoutMs?: number; end?: boolean; localAddress?: string } = {}
) =>
  new Promise<Exchange>((resolve) => {
    const socket = net.connect(options.localAddress === undefined ? { port, host: "127.0.0.1" } : { port, host: "127.0.0.1", localAddress: options.localAddress })
    sockets.push(socket)
    const received: Array<Buffer> = []
    let finished = false
    const finish = (closed: boolean) => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      socket.destroy()
      resolve({ received: Buffer.concat(received), closed })
    }
    const timer = setTimeout(() => finish(false), options.timeoutMs ?? 3000)
    socket.on("data", (chunk) => received.push(chunk))
    socket.on("close", () => finish(true))
    socket.on("error", () => finish(true))
    socket.on("connect", async () => {
      for (const chunk of chunks) {
        if (socket.destroyed) return
        socket.write(chunk)
        if (options.gapMs !== undefined) await new Promise((resolve) => setTimeout(resolve, options.gapMs))
      }
      if (options.end === true) socket.end()
    })
  })

/** A backend that records what arrives on each connection and closes after `closeAfterMs`. */
export const recordingBackend = async (closeAfterMs = 300) => {
  const connections: Array<Buffer> = []
  const server = net.createServer((socket) => {
    const index = connections.push(Buffer.alloc(0)) - 1
    socket.on("data", (chunk) => (connections[index] = Buffer.concat([connections[index]!, chunk])))
    socket.on("error", () => {})
    setTimeout(() => socket.destroy(), closeAfterMs)
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { port: (server.address() as net.AddressInfo).port, connections }
}

/** Decodes an FF kick packet's text. */
/** UTF-16BE, the text of pre-1.7 packets. */
export const utf16be = (text: string): Buffer => Buffer.from(text, "utf16le").swap16()

/** What a 1.6 client sends to ping `host:port` (built by hand; no library sends it correctly). */
export const ping16 = (host: string, port: number): Buffer => {
  const data = Buffer.concat([Buffer.from([78]), Buffer.from([host.length >> 8, host.length & 0xff]), utf16be(host), Buffer.alloc(4)])
  data.writeInt32BE(port, data.length - 4)
  const channel = "MC|PingHost"
  const head = Buffer.from([0xfe, 0x01, 0xfa, 0x00, channel.length])
  const length = Buffer.alloc(2)
  length.writeUInt16BE(data.length)
  return Buffer.concat([head, utf16be(channel), length, data])
}

export const legacyKickText = (bytes: Buffer): string | undefined => {
  if (bytes.length < 3 || bytes[0] !== 0xff) return undefined
  const units = bytes.readUInt16BE(1)
  return Buffer.from(bytes.subarray(3, 3 + units * 2)).swap16().toString("utf16le")
}
