/**
 * Writing a packet session's bytes: straight to the kernel with one send(2) through the native addon when nothing
 * waits in Node's queue for that socket (no write request, no callback, as the raw forwarder does), else through
 * Node's write. What the kernel did not take is queued as it is when nothing reuses its memory (the cipher's output,
 * Portal's own packets, Node's read chunks), and copied out when it is in the read buffer the next read overwrites
 * (relay/userBufferRead.ts).
 */
import type { Socket } from "node:net"
import { directSender } from "../../native/addon.js"
import { tcpFdOf } from "../../native/tcpHandle.js"
import { isSharedReadBuffer } from "../userBufferRead.js"

/** A socket and its descriptor, for direct sends (-1: always through Node). */
export interface Destination {
  readonly socket: Socket
  readonly fd: number
}

export const destinationOf = (socket: Socket): Destination => ({ socket, fd: directSender() === undefined ? -1 : (tcpFdOf(socket) ?? -1) })

export const writeTo = ({ socket, fd }: Destination, bytes: Buffer): void => {
  // Nothing queued in Node means nothing queued in libuv either, so a send here keeps the order of the bytes. A
  // destroyed socket's descriptor number may already belong to another connection: never send to it.
  if (fd >= 0 && socket.writableLength === 0 && !socket.destroyed && !socket.writableEnded) {
    const sent = directSender()!(fd, bytes, bytes.length)
    if (sent === bytes.length) return
    if (sent > 0) return queue(socket, bytes.subarray(sent))
    // An error (negative) or a full buffer: the write below meets the error too, and Node reports it.
  }
  queue(socket, bytes)
}

const queue = (socket: Socket, bytes: Buffer): void => {
  socket.write(isSharedReadBuffer(bytes) ? Buffer.from(bytes) : bytes)
}
