// @ts-check
/**
 * The bench backend, a forked child: a minimal Minecraft server on raw sockets. It answers status pings, and for a
 * login it writes FIRST_BYTES once it has the Login Start, then behaves as the player name says:
 *   bulk  writes as fast as the connection takes, and counts what it receives;
 *   echo  sends every byte it receives back (game-shaped load);
 *   idle, rate  send nothing more (memory, connection rate).
 * The same bytes reach it directly, through HAProxy or through Portal. It also runs the fake session service the
 * client_only target asks (`hasJoined` says yes to every name, with a skin property, as Mojang's would).
 */
import { createHash } from "node:crypto"
import * as http from "node:http"
import * as net from "node:net"
import { serve } from "./ipc.mjs"
import { FIRST_BYTES, NEXT_STATUS, nextStateOf, playerNameOf, readFrame, statusResponse } from "./wire.mjs"

const STATUS = statusResponse(
  JSON.stringify({
    version: { name: "1.21.4", protocol: 769 },
    players: { max: 100, online: 0 },
    description: { text: "Portal bench backend" }
  })
)
const BULK_CHUNK = Buffer.alloc(64 * 1024, 0x5a)

let open = 0
let bulkReceived = 0

/** @param {net.Socket} socket */
const pump = (socket) => {
  while (socket.writable && socket.write(BULK_CHUNK));
}

/** @param {net.Socket} socket @param {string} name @param {Buffer} rest bytes after the Login Start */
const afterLogin = (socket, name, rest) => {
  socket.write(FIRST_BYTES)
  switch (name) {
    case "bulk":
      bulkReceived += rest.length
      socket.on("data", (chunk) => (bulkReceived += chunk.length))
      socket.on("drain", () => pump(socket))
      pump(socket)
      return
    case "echo":
      if (rest.length > 0) socket.write(rest)
      socket.on("data", (chunk) => socket.write(chunk))
      return
    default:
      socket.resume()
  }
}

/**
 * Reads frames until the connection's role is known, then hands over.
 * @param {net.Socket} socket
 */
const accept = (socket) => {
  open++
  socket.on("error", () => {})
  socket.on("close", () => open--)
  /** @type {Buffer} */
  let buffer = Buffer.alloc(0)
  /** @type {"handshake" | "login" | "status" | "ping"} */
  let step = "handshake"
  const onData = (/** @type {Buffer} */ chunk) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk])
    for (let packet = readFrame(buffer); packet !== undefined; packet = readFrame(buffer)) {
      buffer = buffer.subarray(packet.end)
      switch (step) {
        case "handshake":
          step = nextStateOf(packet.body) === NEXT_STATUS ? "status" : "login"
          break
        case "status":
          socket.write(STATUS)
          step = "ping"
          break
        case "ping":
          socket.end(Buffer.concat([Buffer.from([9, 1]), packet.body]))
          socket.off("data", onData)
          return
        case "login":
          socket.off("data", onData)
          return afterLogin(socket, playerNameOf(packet.body), buffer)
      }
    }
  }
  socket.on("data", onData)
}

const server = net.createServer({ noDelay: true }, accept)

/** GET /session/minecraft/hasJoined?username=NAME: the profile of NAME (its id from the name), with a skin. */
const sessionService = http.createServer((request, response) => {
  const url = new URL(request.url ?? "/", "http://localhost")
  const name = url.searchParams.get("username") ?? ""
  if (url.pathname !== "/session/minecraft/hasJoined" || name === "") return response.writeHead(404).end()
  const id = createHash("md5").update(name).digest("hex")
  const textures = Buffer.from(JSON.stringify({ profileName: name, textures: { SKIN: { url: `http://textures.example/${id}` } } })).toString("base64")
  response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id, name, properties: [{ name: "textures", value: textures, signature: "c2lnbmF0dXJl" }] }))
})

serve({
  sessionService: () =>
    new Promise((resolve) => sessionService.listen({ host: "127.0.0.1", port: 0, backlog: 4096 }, () => resolve(/** @type {net.AddressInfo} */ (sessionService.address()).port))),
  listen: () =>
    new Promise((resolve) => server.listen({ host: "127.0.0.1", port: 0, backlog: 4096 }, () => resolve(/** @type {net.AddressInfo} */ (server.address()).port))),
  snapshot: () => ({ open, bulkReceived })
})
