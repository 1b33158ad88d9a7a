/**
 * A demo backend for development mode, built on Portal's own protocol code: it answers status pings with a MOTD
 * naming the server, and greets a login with a disconnect message saying where the player arrived.
 */
import * as Effect from "effect/Effect"
import * as net from "node:net"
import { readFrame } from "../../protocol/frame.js"
import { decodeHandshakeBody, NEXT_STATE_STATUS, splitAddress } from "../../protocol/handshake.js"
import { decodeLoginStartBody, encodeLoginDisconnect } from "../../protocol/login.js"
import { encodePongFromBody, encodeStatusResponse } from "../../protocol/status.js"

export interface DemoBackendInfo {
  readonly serverId: string
  /** 1-based position of the address this backend stands in for. */
  readonly index: number
  readonly of: number
}

const MAX_FRAME = 8192

/** Serves one connection: a tiny state machine over the frames the client sends. */
const serve = (socket: net.Socket, info: DemoBackendInfo, port: number) => {
  let buffer = Buffer.alloc(0)
  let state: "handshake" | "status" | "login" = "handshake"
  let protocolVersion = 0
  let host = ""
  socket.on("error", () => socket.destroy())
  socket.setTimeout(30_000, () => socket.destroy())
  socket.on("data", (chunk) => {
    buffer = Buffer.concat([buffer, chunk])
    for (;;) {
      const frame = readFrame(buffer, 0, MAX_FRAME)
      if (frame._tag === "Incomplete") return
      if (frame._tag === "Invalid") return socket.destroy()
      const body = buffer.subarray(frame.bodyStart, frame.end)
      buffer = buffer.subarray(frame.end)
      try {
        if (state === "handshake") {
          // A PROXY header or a forwarded address is not expected here; the demo keeps to plain handshakes.
          const handshake = decodeHandshakeBody(body)
          protocolVersion = handshake.protocolVersion
          host = splitAddress(handshake.address.split("\0")[0] ?? "").host
          state = handshake.nextState === NEXT_STATE_STATUS ? "status" : "login"
        } else if (state === "status" && frame.packetId === 0x00) {
          const json = {
            version: { name: "Portal demo", protocol: protocolVersion },
            players: { max: 20, online: 0, sample: [] },
            description: `§aDemo backend §7of §f${info.serverId}§7 (${info.index}/${info.of})`
          }
          socket.write(encodeStatusResponse(JSON.stringify(json)))
        } else if (state === "status" && frame.packetId === 0x01) {
          socket.end(encodePongFromBody(body))
        } else if (state === "login") {
          const { name } = decodeLoginStartBody(body, protocolVersion)
          const message =
            `§aHello ${name}!§r You reached server §f${info.serverId}§r through Portal ` +
            `(backend ${info.index} of ${info.of}, 127.0.0.1:${port}, asked for "${host}").\n\n` +
            "§7This is Portal's development mode: no game server is running."
          socket.end(encodeLoginDisconnect(message))
        }
      } catch {
        socket.destroy()
      }
    }
  })
}

/** Starts a demo backend on a free loopback port; it closes with the scope. */
export const startDemoBackend = (info: DemoBackendInfo) =>
  Effect.acquireRelease(
    Effect.async<net.Server, Error>((resume) => {
      const server = net.createServer()
      server.on("connection", (socket) => serve(socket, info, (server.address() as net.AddressInfo).port))
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.sync(() => server.close())
  ).pipe(Effect.map((server) => ({ host: "127.0.0.1", port: (server.address() as net.AddressInfo).port })))
