/**
 * A hand-driven backend for the packet modes: each connection is given to a script that reads whole packets (id and
 * body, inflated once compression is on) and writes its own, compressing them at the threshold it chose. What a
 * backend may do that minecraft-protocol's server does not: change compression, ask login plugin questions, close
 * at any step.
 */
import { once } from "node:events"
import * as net from "node:net"
import { deflateSync, inflateSync } from "node:zlib"
import { afterEach } from "vitest"
import { readVarInt, encodeVarInt } from "../../src/protocol/varint.js"

export interface Packet {
  readonly id: number
  readonly body: Buffer
}

export interface ScriptedConnection {
  readonly socket: net.Socket
  /** The next whole packet from Portal (the handshake first); rejects when the connection closed first. */
  read(timeoutMs?: number): Promise<Packet>
  /** Writes a packet at the current threshold. */
  send(id: number, body: Buffer): void
  /** Compression from now on, both ways (-1: off); the Set Compression itself is the script's to send. */
  threshold: number
}

const string = (text: string): Buffer => Buffer.concat([encodeVarInt(Buffer.byteLength(text)), Buffer.from(text)])
export const mcString = string

const servers: Array<{ close(): void }> = []
afterEach(() => {
  for (const server of servers.splice(0)) server.close()
})

export const startScriptedBackend = async (script: (connection: ScriptedConnection) => Promise<void>) => {
  const sockets = new Set<net.Socket>()
  const errors: Array<unknown> = []
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("error", () => {})
    let buffered = Buffer.alloc(0)
    const queue: Array<Packet> = []
    let waiting: { resolve: (packet: Packet) => void; reject: (error: Error) => void } | undefined
    let closed = false
    const connection: ScriptedConnection = {
      socket,
      threshold: -1,
      read: (timeoutMs = 5000) =>
        new Promise<Packet>((resolve, reject) => {
          const next = queue.shift()
          if (next !== undefined) return resolve(next)
          if (closed) return reject(new Error("closed"))
          const timer = setTimeout(() => reject(new Error("read timed out")), timeoutMs)
          waiting = {
            resolve: (packet) => {
              clearTimeout(timer)
              resolve(packet)
            },
            reject: (error) => {
              clearTimeout(timer)
              reject(error)
            }
          }
        }),
      send: (id, body) => {
        const content = Buffer.concat([encodeVarInt(id), body])
        let framed: Buffer
        if (connection.threshold < 0) framed = content
        else if (content.length < connection.threshold) framed = Buffer.concat([encodeVarInt(0), content])
        else framed = Buffer.concat([encodeVarInt(content.length), deflateSync(content)])
        socket.write(Buffer.concat([encodeVarInt(framed.length), framed]))
      }
    }
    const deliver = (packet: Packet) => {
      const w = waiting
      waiting = undefined
      if (w !== undefined) w.resolve(packet)
      else queue.push(packet)
    }
    socket.on("data", (chunk) => {
      buffered = Buffer.concat([buffered, chunk])
      for (;;) {
        const length = readVarInt(buffered, 0)
        if (length._tag !== "Value" || buffered.length < length.size + length.value) break
        let content = buffered.subarray(length.size, length.size + length.value)
        buffered = buffered.subarray(length.size + length.value)
        if (connection.threshold >= 0) {
          const dataLength = readVarInt(content, 0)
          if (dataLength._tag !== "Value") break
          content = dataLength.value === 0 ? content.subarray(dataLength.size) : inflateSync(content.subarray(dataLength.size))
        }
        const id = readVarInt(content, 0)
        if (id._tag !== "Value") break
        deliver({ id: id.value, body: Buffer.from(content.subarray(id.size)) })
      }
    })
    socket.on("close", () => {
      closed = true
      sockets.delete(socket)
      waiting?.reject(new Error("closed"))
      waiting = undefined
    })
    script(connection).catch((error) => errors.push(error))
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const handle = {
    port: (server.address() as net.AddressInfo).port,
    errors,
    close: () => {
      for (const socket of sockets) socket.destroy()
      server.close()
    }
  }
  servers.push(handle)
  return handle
}
