/** Node's TCP handle (TCPWrap) behind a socket: the parts of it the addon's callers use. Not public Node API. */
import type { Socket } from "node:net"

export interface TcpHandle {
  readonly fd: number
  readStop(): number
}

/** The socket's TCP handle; undefined for other handles, and before the socket has one or after it closed. */
export const tcpHandleOf = (socket: Socket): TcpHandle | undefined => {
  const handle = (socket as unknown as { _handle?: (TcpHandle & object) | null })._handle
  return handle?.constructor.name === "TCP" ? handle : undefined
}

/** The descriptor of the socket's TCP handle, where it has a valid one. */
export const tcpFdOf = (socket: Socket): number | undefined => {
  const fd = tcpHandleOf(socket)?.fd
  return typeof fd === "number" && fd >= 0 ? fd : undefined
}
