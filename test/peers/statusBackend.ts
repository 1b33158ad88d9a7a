/**
 * A raw TCP backend (node:net on 127.0.0.1) that answers whatever it receives (a handshake and a status request)
 * with the bytes it is given: a good status answer, or any kind of bad one. What it answers can be changed while
 * it runs. The answers below are the ones no Minecraft library would send.
 */
import * as net from "node:net"
import { afterEach } from "vitest"
import { encodeStatusResponse } from "../../src/protocol/status.js"
import { encodeVarInt } from "../../src/protocol/varint.js"

export interface StatusBackend {
  readonly port: number
  /** Connections accepted so far. */
  readonly connections: () => number
  /** What the next connection is answered with. */
  answer: Buffer
  /** How long it waits after the first bytes before answering. */
  delayMs: number
}

const servers: Array<net.Server> = []
const sockets = new Set<net.Socket>()
afterEach(async () => {
  for (const socket of sockets) socket.destroy()
  sockets.clear()
  await Promise.all(servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))))
})

export const startStatusBackend = async (answer: Buffer, options: { delayMs?: number } = {}): Promise<StatusBackend> => {
  let connections = 0
  const server = net.createServer((socket) => {
    connections += 1
    sockets.add(socket)
    socket.on("error", () => {})
    socket.on("close", () => sockets.delete(socket))
    socket.once("data", () => {
      setTimeout(() => {
        if (!socket.destroyed) socket.end(backend.answer)
      }, backend.delayMs)
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const backend: StatusBackend = {
    port: (server.address() as net.AddressInfo).port,
    connections: () => connections,
    answer,
    delayMs: options.delayMs ?? 0
  }
  return backend
}

/** A frame: VarInt length, VarInt packet id, body. */
export const frame = (packetId: number, body: Buffer): Buffer => {
  const inner = Buffer.concat([encodeVarInt(packetId), body])
  return Buffer.concat([encodeVarInt(inner.length), inner])
}

/** A status response (packet 0x00) carrying `text`. */
export const statusAnswer = (text: string): Buffer => encodeStatusResponse(text)

/** A status response whose string is these bytes exactly (for text that is not UTF-8). */
export const statusAnswerBytes = (bytes: Buffer): Buffer => frame(0x00, Buffer.concat([encodeVarInt(bytes.length), bytes]))

export const GOOD_STATUS = {
  version: { name: "Paper 1.20.4", protocol: 765, extra: "kept" },
  players: { max: 20, online: 3, sample: [{ name: "Alex", id: "ec561538-f3fd-461d-aff5-086b22154bce" }] },
  description: { text: "raw backend says hi" },
  forgeData: { channels: [], mods: [{ modId: "forge", modmarker: "49.0.3" }], fmlNetworkVersion: 3 },
  enforcesSecureChat: true
}

/**
 * Every kind of bad answer, with what the warning says about it. None of these may crash a connection or a probe.
 */
export const BAD_ANSWERS: ReadonlyArray<{ readonly kind: string; readonly bytes: Buffer; readonly reason: RegExp }> = [
  { kind: "garbage", bytes: Buffer.from("ffffffffff0a6e6f6e73656e7365", "hex"), reason: /not a status response: VarInt longer than 5 bytes/ },
  { kind: "null", bytes: statusAnswer("null"), reason: /not a status answer: expected a JSON object, got null/ },
  { kind: "an array", bytes: statusAnswer("[1,2,3]"), reason: /not a status answer: expected a JSON object, got \[1,2,3\]/ },
  { kind: "a number", bytes: statusAnswer("42"), reason: /not a status answer: expected a JSON object, got 42/ },
  { kind: "a string", bytes: statusAnswer(`"hello"`), reason: /not a status answer: expected a JSON object, got "hello"/ },
  { kind: "truncated JSON", bytes: statusAnswer(`{"version":{"name":"1.20.4","protocol":765},"descr`), reason: /not JSON \(/ },
  { kind: "text that is not JSON", bytes: statusAnswer("<html><body>Bad Gateway</body></html>"), reason: /not JSON \(/ },
  { kind: "invalid UTF-8", bytes: statusAnswerBytes(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d])), reason: /not valid UTF-8/ },
  { kind: "the wrong packet id", bytes: frame(0x01, Buffer.alloc(8)), reason: /not a status response: packet 0x1 instead of a status response/ },
  { kind: "an oversized length", bytes: Buffer.concat([encodeVarInt(0x0fffffff), Buffer.alloc(32)]), reason: /not a status response: frame of 268435455 bytes exceeds/ },
  { kind: "a field of the wrong type", bytes: statusAnswer(`{"version":"1.20.4","description":"hi"}`), reason: /not a status answer: version: expected an object \{ name, protocol \}, got "1\.20\.4"/ },
  { kind: "nesting too deep to write out again", bytes: statusAnswer(`{"description":${"[".repeat(100_000)}${"]".repeat(100_000)}}`), reason: /not a status answer: nested deeper than 128 levels/ },
  { kind: "a player count that is a string", bytes: statusAnswer(`{"players":{"max":"20","online":1}}`), reason: /not a status answer: players\.max: expected number, got "20"/ }
]
