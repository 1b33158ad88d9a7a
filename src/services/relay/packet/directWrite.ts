/**
 * Writing a packet session's bytes: straight to the kernel with one send(2) through the native addon when nothing
 * waits in Node's queue for that socket (no write request, no callback, as the raw forwarder does), else through
 * Node's write. The bytes are views of buffers nothing reuses (Node's read chunks, the cipher's output), so what the
 * kernel did not take is queued without a copy.
 */
import type { Socket } from "node:net"
import { directSender } from "../../native/addon.js"
import { tcpFdOf } from "../../native/tcpHandle.js"




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
    if (sent > 0) {
      socket.write(bytes.subarray(sent))
      return
    }
    // An error (negative) or a full buffer: the write below meets the error too, and Node reports it.
  }
  socket.write(bytes)
}
