/**
 * A mark of how far a socket's sends have got, for the relay watchdog: a number that changes whenever the peer takes
 * bytes. Three queues hide that progress from `writableLength` alone:
 * - Node lowers `writableLength` only once a whole write has gone out, so a large write (the busy relay's 256 KiB,
 *   a packet session's read chunk) to a slow reader shows nothing for as long as it takes;
 * - libuv's queue (the handle's `writeQueueSize`, not public Node API) shrinks only when the kernel takes bytes;
 * - the kernel takes bytes again only once a third of the socket's send buffer (megabytes on a fast link) is free.
 * So while the socket is blocked the mark also counts the kernel's unacknowledged bytes (SIOCOUTQ, through the addon),
 * which fall as the peer reads. The mark is compared for change only: handing Node's next write to libuv, after the
 * previous one went out, moves it too.
 */
import type { Socket } from "node:net"
import { unsentBytesReader } from "../native/addon.js"
import { tcpFdOf } from "../native/tcpHandle.js"

const writeQueueSizeOf = (socket: Socket): number => {
  const size = (socket as unknown as { _handle?: { writeQueueSize?: unknown } | null })._handle?.writeQueueSize
  return typeof size === "number" ? size : 0
}

/** The kernel's unacknowledged bytes where the addon can tell, else 0. */
const unsentBytesOf = (socket: Socket): number => {
  const unsent = unsentBytesReader()
  if (unsent === undefined) return 0
  const fd = tcpFdOf(socket)
  return fd === undefined ? 0 : Math.max(0, unsent(fd))
}

/**
 * `handed`: the bytes given to the socket so far (through Node's write or sent directly); `blocked`: whether bytes
 * wait behind its full send buffer (only then is the kernel asked, a system call).
 */
export const sendMark = (socket: Socket, handed: number, blocked: boolean): number =>
  handed - socket.writableLength - writeQueueSizeOf(socket) - (blocked ? unsentBytesOf(socket) : 0)
