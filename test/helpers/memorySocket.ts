/**
 * An in-memory connection: two ends, each a Duplex with the members of `net.Socket` that Portal's connection path
 * uses (addresses, byte counts, keepalive and no-delay calls that do nothing). Bytes written to one end are read
 * from the other; ending one end ends the other's input; destroying one closes both. No descriptor, no kernel.
 */
import type * as net from "node:net"
import { Duplex } from "node:stream"

export interface MemoryEnd extends Duplex {
  readonly remoteAddress: string
  readonly remotePort: number
  readonly localAddress: string
  readonly localPort: number
  bytesRead: number
  bytesWritten: number
}

class End extends Duplex {
  peer: End | undefined
  bytesRead = 0
  bytesWritten = 0
  connecting = false

  constructor(
    readonly remoteAddress: string,
    readonly remotePort: number,
    readonly localAddress: string,
    readonly localPort: number
  ) {
    super({ allowHalfOpen: true })
  }

  override _read(): void {}

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.bytesWritten += chunk.length
    const peer = this.peer
    if (peer !== undefined && !peer.destroyed) {
      peer.bytesRead += chunk.length
      peer.push(chunk)
    }
    callback()
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.peer !== undefined && !this.peer.destroyed) this.peer.push(null)
    callback()
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const peer = this.peer
    this.peer = undefined
    if (peer !== undefined && !peer.destroyed) {
      peer.push(null)
      peer.destroy()
    }
    callback(error)
  }

  setKeepAlive(): this {
    return this
  }

  setNoDelay(): this {
    return this
  }

  setTimeout(): this {
    return this
  }
}

/** Both ends of an in-memory connection: `client` as a client at `clientAddress` sees it, `server` as the server does. */
export const memoryConnection = (
  clientAddress = "198.51.100.7",
  clientPort = 50_000,
  serverAddress = "127.0.0.1",
  serverPort = 25565
): { readonly client: net.Socket; readonly server: net.Socket } => {
  const client = new End(serverAddress, serverPort, clientAddress, clientPort)
  const server = new End(clientAddress, clientPort, serverAddress, serverPort)
  client.peer = server
  server.peer = client
  // The one place a memory end stands in for a socket: it has every member the connection path reads.
  return { client: client as unknown as net.Socket, server: server as unknown as net.Socket }
}
