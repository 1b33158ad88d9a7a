// @ts-check
/**
 * The Minecraft bytes the bench exchanges: handshake, Login Start, status request and ping, and a frame splitter
 * for the stream side. Only what a proxy in a raw mode reads before relaying; everything after is opaque payload.
 */

/** 1.21.4: Login Start carries a UUID (protocol >= 764), as a current client sends it. */
const PROTOCOL = 769
export const NEXT_STATUS = 1
export const NEXT_LOGIN = 2

/** What the bench backend writes once it has the Login Start (a Set Compression packet, threshold 256). */
export const FIRST_BYTES = Buffer.from([0x03, 0x03, 0x80, 0x02])

/** @param {number} value */
const varInt = (value) => {
  const out = []
  let rest = value >>> 0
  do {
    const low = rest & 0x7f
    rest >>>= 7
    out.push(rest === 0 ? low : low | 0x80)
  } while (rest !== 0)
  return Buffer.from(out)
}

/** @param {string} text */
const string = (text) => {
  const bytes = Buffer.from(text, "utf8")
  return Buffer.concat([varInt(bytes.length), bytes])
}

/** @param {number} id @param {Buffer} body */
export const frame = (id, body) => {
  const payload = Buffer.concat([varInt(id), body])
  return Buffer.concat([varInt(payload.length), payload])
}

/** @param {string} host @param {number} port @param {number} nextState */
export const handshake = (host, port, nextState) => {
  const portBytes = Buffer.alloc(2)
  portBytes.writeUInt16BE(port)
  return frame(0x00, Buffer.concat([varInt(PROTOCOL), string(host), portBytes, varInt(nextState)]))
}

/** The player name selects what the bench backend does after login (see backend.mjs). @param {string} name */
export const loginStart = (name) => frame(0x00, Buffer.concat([string(name), Buffer.alloc(16, 0x42)]))

export const STATUS_REQUEST = frame(0x00, Buffer.alloc(0))

/** @param {bigint} payload */
export const ping = (payload) => {
  const body = Buffer.alloc(8)
  body.writeBigInt64BE(payload)
  return frame(0x01, body)
}

/** @param {string} json */
export const statusResponse = (json) => frame(0x00, string(json))

/**
 * @param {Buffer} buffer @param {number} offset
 * @returns {{ value: number, size: number } | undefined} undefined while incomplete
 */
const readVarInt = (buffer, offset) => {
  let value = 0
  for (let i = 0; i < 5; i++) {
    if (offset + i >= buffer.length) return undefined
    const byte = /** @type {number} */ (buffer[offset + i])
    value |= (byte & 0x7f) << (7 * i)
    if ((byte & 0x80) === 0) return { value: value >>> 0, size: i + 1 }
  }
  throw new Error("VarInt longer than 5 bytes")
}

/**
 * The first complete frame of `buffer`.
 * @param {Buffer} buffer
 * @returns {{ id: number, body: Buffer, end: number } | undefined} undefined while incomplete
 */
export const readFrame = (buffer) => {
  const length = readVarInt(buffer, 0)
  if (length === undefined || buffer.length < length.size + length.value) return undefined
  const id = readVarInt(buffer, length.size)
  if (id === undefined) throw new Error("frame without a packet id")
  const end = length.size + length.value
  return { id: id.value, body: buffer.subarray(length.size + id.size, end), end }
}

/**
 * @param {Buffer} body a handshake body
 * @returns {number} its next state
 */
export const nextStateOf = (body) => {
  let at = /** @type {{ size: number }} */ (readVarInt(body, 0)).size
  const host = /** @type {{ value: number, size: number }} */ (readVarInt(body, at))
  at += host.size + host.value + 2
  return /** @type {{ value: number }} */ (readVarInt(body, at)).value
}

/** @param {Buffer} body a Login Start body */
export const playerNameOf = (body) => {
  const length = /** @type {{ value: number, size: number }} */ (readVarInt(body, 0))
  return body.subarray(length.size, length.size + length.value).toString("utf8")
}
