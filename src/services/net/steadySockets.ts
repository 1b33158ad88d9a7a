/**
 * Making `net.Socket`s without a fresh hidden class each.
 *
 * Node's Socket constructor copies its options (`{ ...options }`) and then sets `allowHalfOpen`, `emitClose`,
 * `autoDestroy` and `decodeStrings` on the copy. In the V8 of Node 20, adding a property to an object made by a spread
 * gives it a new map every time once the spread's inline cache has warmed up: every socket's options then have a map
 * of their own, so each property read of them in the Socket, Duplex and stream-state constructors misses V8's caches
 * and is looked up the slow way, and every socket leaves a dead map behind for the collector. Measured: 5 µs per
 * `new net.Socket({ noDelay: true })` against 0.17 µs when the options already hold those four properties (the copy
 * then only overwrites them, and keeps one map). Both kinds of socket Portal makes per connection, the accepted one
 * and the backend's, are made with the four properties present, at the values Node sets anyway.
 */
import diagnosticsChannel from "node:diagnostics_channel"
import * as net from "node:net"

interface StreamOptions {
  readonly emitClose: boolean
  readonly autoDestroy: boolean
  readonly decodeStrings: boolean
}

/** `net.connect` to host:port with TCP_NODELAY, the options complete (see above). */
export const connectSteady = (host: string, port: number, noDelay: boolean): net.Socket => {
  // Stream options Node's types do not list for net.connect, though the Socket it makes reads them.
  const options: net.NetConnectOpts & StreamOptions = { host, port, noDelay, allowHalfOpen: false, emitClose: false, autoDestroy: true, decodeStrings: false }
  return net.connect(options)
}

/** What Node's listening handle and server keep that accepting needs (Node's internals, checked before use). */
interface ListeningHandle {
  onconnection: (this: ListeningHandle, error: number, client: unknown) => void
}
interface ServerInternals {
  _handle?: ListeningHandle | null
  _connections?: number
  allowHalfOpen?: boolean
  pauseOnConnect?: boolean
  highWaterMark?: number
  noDelay?: boolean
  keepAlive?: boolean
}

const serverSocketChannel = diagnosticsChannel.channel("net.server.socket")

/**
 * Makes a listening server create its accepted sockets as Node's own `onconnection` does, but with complete options.
 * Errors and connections over `maxConnections` still go through Node's code, and so does everything when the server
 * is not as expected (another Node, `noDelay` or `keepAlive` asked of the server): then nothing changes. Call it once
 * the server listens; returns whether it took effect.
 */
export const acceptSteady = (server: net.Server): boolean => {
  const internals = server as unknown as ServerInternals
  const handle = internals._handle
  if (handle == null || typeof handle.onconnection !== "function" || typeof internals._connections !== "number") return false
  if (internals.noDelay === true || internals.keepAlive === true) return false
  const nodeAccept = handle.onconnection
  handle.onconnection = function onconnection(error, client) {
    const connections = internals._connections ?? 0
    // Node's own checks, in its order: an accept error, then the server's cap.
    if (error || (server.maxConnections && connections >= server.maxConnections)) {
      nodeAccept.call(this, error, client)
      return
    }
    const socket = new net.Socket({
      handle: client,
      allowHalfOpen: internals.allowHalfOpen === true,
      pauseOnCreate: internals.pauseOnConnect === true,
      readable: true,
      writable: true,
      readableHighWaterMark: internals.highWaterMark,
      writableHighWaterMark: internals.highWaterMark,
      emitClose: false,
      autoDestroy: true,
      decodeStrings: false
    } as net.SocketConstructorOpts & StreamOptions)
    internals._connections = connections + 1
    const owned = socket as net.Socket & { server: net.Server; _server: net.Server }
    owned.server = server
    owned._server = server
    server.emit("connection", socket)
    if (serverSocketChannel.hasSubscribers) serverSocketChannel.publish({ socket })
  }
  return true
}
