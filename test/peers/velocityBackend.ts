/**
 * A backend that implements the backend side of Velocity's modern forwarding, as Paper's does it (written from
 * Velocity's documentation and Paper's VelocityProxy, not from Portal's code): after Login Start it sends a Login
 * Plugin Request on `velocity:player_info` asking for a version, checks the answer's HMAC-SHA256 with its own copy of
 * the secret, decodes the payload and records it; then refuses the login with a Disconnect that says what it saw
 * (so no play state is needed). A bad HMAC gets Paper's "Unable to verify player details".
 */
import { createHmac, timingSafeEqual } from "node:crypto"
import * as net from "node:net"
import { afterEach } from "vitest"

export interface ForwardedPlayer {
  readonly version: number
  readonly address: string
  /** Dashed. */
  readonly uuid: string
  readonly name: string
  readonly properties: Array<{ name: string; value: string; signature?: string }>
  /** Versions 2 and 3: the player's chat key, and (3) whose it is, as Paper reads them. */
  readonly key?: { readonly expiresAt: bigint; readonly key: Buffer; readonly signature: Buffer; readonly holder?: string | undefined }
}

export interface VelocityBackend {
  readonly port: number
  readonly forwarded: Array<ForwardedPlayer>
  readonly refused: Array<string>
  close(): void
}

const servers: Array<net.Server> = []
afterEach(() => {
  for (const server of servers.splice(0)) server.close()
})

const varInt = (value: number): Buffer => {
  const out: Array<number> = []
  let rest = value >>> 0
  do {
    const low = rest & 0x7f
    rest >>>= 7
    out.push(rest === 0 ? low : low | 0x80)
  } while (rest !== 0)
  return Buffer.from(out)
}

const string = (text: string) => {
  const bytes = Buffer.from(text, "utf8")
  return Buffer.concat([varInt(bytes.length), bytes])
}

const frame = (id: number, body: Buffer) => {
  const payload = Buffer.concat([varInt(id), body])
  return Buffer.concat([varInt(payload.length), payload])
}

/** A cursor over a buffer: the reads the forwarding payload needs. */
class Cursor {
  at = 0
  constructor(readonly bytes: Buffer) {}
  varInt(): number {
    let value = 0
    for (let i = 0; i < 5; i++) {
      const byte = this.bytes[this.at++]!
      value |= (byte & 0x7f) << (7 * i)
      if ((byte & 0x80) === 0) return value
    }
    throw new Error("VarInt too long")
  }
  string(): string {
    const length = this.varInt()
    const text = this.bytes.toString("utf8", this.at, this.at + length)
    this.at += length
    return text
  }
  bool(): boolean {
    return this.bytes[this.at++] === 1
  }
  bytesOf(): Buffer {
    const length = this.varInt()
    const out = this.bytes.subarray(this.at, this.at + length)
    this.at += length
    return out
  }
  i64(): bigint {
    const value = this.bytes.readBigInt64BE(this.at)
    this.at += 8
    return value
  }
  uuid(): string {
    const hex = this.bytes.toString("hex", this.at, this.at + 16)
    this.at += 16
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
  }
}

/** Frames of the uncompressed login state, as they arrive. */
const frames = (socket: net.Socket, onFrame: (id: number, body: Buffer) => void) => {
  let buffer = Buffer.alloc(0)
  socket.on("data", (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk])
    for (;;) {
      const cursor = new Cursor(buffer)
      let length: number
      try {
        length = cursor.varInt()
      } catch {
        return
      }
      if (cursor.at > buffer.length || buffer.length < cursor.at + length) return
      const packet = new Cursor(buffer.subarray(cursor.at, cursor.at + length))
      const id = packet.varInt()
      const body = packet.bytes.subarray(packet.at)
      buffer = buffer.subarray(cursor.at + length)
      onFrame(id, body)
    }
  })
}

const MESSAGE_ID = 4242

export const startVelocityBackend = async (secret: string, requestVersion = 4): Promise<VelocityBackend> => {
  const backend: VelocityBackend = { port: 0, forwarded: [], refused: [], close: () => server.close() }
  const server = net.createServer((socket) => {
    socket.on("error", () => {})
    let seen = 0
    const disconnect = (text: string) => socket.end(frame(0x00, string(JSON.stringify({ text }))))
    frames(socket, (id, body) => {
      seen += 1
      if (seen === 2) {
        // Login Start: ask the proxy for the player's data.
        socket.write(frame(0x04, Buffer.concat([varInt(MESSAGE_ID), string("velocity:player_info"), Buffer.from([requestVersion])])))
        return
      }
      if (seen < 2 || id !== 0x02) return
      const response = new Cursor(body)
      if (response.varInt() !== MESSAGE_ID || !response.bool()) {
        backend.refused.push("no forwarding answer")
        return disconnect("This server requires you to connect with Velocity.")
      }
      const data = body.subarray(response.at)
      const signature = data.subarray(0, 32)
      const payload = data.subarray(32)
      const expected = createHmac("sha256", secret).update(payload).digest()
      if (signature.length !== 32 || !timingSafeEqual(signature, expected)) {
        backend.refused.push("bad HMAC")
        return disconnect("Unable to verify player details.")
      }
      const cursor = new Cursor(payload)
      const version = cursor.varInt()
      const address = cursor.string()
      const uuid = cursor.uuid()
      const name = cursor.string()
      const properties: ForwardedPlayer["properties"] = []
      for (let n = cursor.varInt(); n > 0; n--) {
        const propertyName = cursor.string()
        const value = cursor.string()
        properties.push(cursor.bool() ? { name: propertyName, value, signature: cursor.string() } : { name: propertyName, value })
      }
      if ((version === 2 || version === 3) && cursor.at < payload.length) {
        const expiresAt = cursor.i64()
        const key = cursor.bytesOf()
        const keySignature = cursor.bytesOf()
        const holder = version === 3 && cursor.bool() ? cursor.uuid() : undefined
        backend.forwarded.push({ version, address, uuid, name, properties, key: { expiresAt, key, signature: keySignature, holder } })
      } else backend.forwarded.push({ version, address, uuid, name, properties })
      disconnect(`forwarded ${name}`)
    })
  })
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  ;(backend as { port: number }).port = (server.address() as net.AddressInfo).port
  return backend
}
