// @ts-check
/**
 * The load generator, a forked child started for one measurement. `start` opens the load of one scenario against a
 * port and answers once it runs; `snapshot` returns counters (and round-trip percentiles since the previous
 * snapshot), so the orchestrator times its own window; `stop` closes everything.
 *
 * Modes: bulk (`count` connections, each writing and reading as fast as it can), game (sessions sending 100-byte timestamped
 * packets that the backend echoes), idle (sessions that log in and wait), rate (logins one after another per loop),
 * status (status request and ping one after another per loop).
 */
import { constants, createDecipheriv, publicEncrypt, randomBytes } from "node:crypto"
import * as net from "node:net"
import { performance } from "node:perf_hooks"
import { serve } from "./ipc.mjs"
import { FIRST_BYTES, frame, handshake, loginStart, NEXT_LOGIN, NEXT_STATUS, ping, readFrame, STATUS_REQUEST } from "./wire.mjs"

const ATTEMPT_TIMEOUT_MS = 10_000
const GAME_PACKET_BYTES = 100
const GAME_PERIOD_MS = 50
const BULK_CHUNK = Buffer.alloc(64 * 1024, 0xa5)
const PONG_BYTES = 10

/** @typedef {{ port: number, host: string, count: number, concurrency: number, online?: boolean }} Load */

/**
 * Players come from many addresses, and a proxy may bound what one address has in progress: each connection
 * leaves from the next loopback address of 127.1.0.0/16.
 */
let nextSource = 0
const sourceAddress = () => {
  nextSource = (nextSource + 1) % (254 * 254)
  return `127.1.${Math.floor(nextSource / 254) + 1}.${(nextSource % 254) + 1}`
}

/** @type {Set<net.Socket>} */
const sockets = new Set()
let stopped = false
let received = 0
let completed = 0
let errors = 0
/** @type {string | undefined} */
let firstError
let samples = new Float64Array(1 << 16)
let sampleCount = 0
/** @type {NodeJS.Timeout | undefined} */
let ticker

/** @param {unknown} error */
const fail = (error) => {
  errors++
  firstError ??= error instanceof Error ? error.message : String(error)
}

/** @param {number} ms */
const record = (ms) => {
  if (sampleCount === samples.length) {
    const grown = new Float64Array(samples.length * 2)
    grown.set(samples)
    samples = grown
  }
  samples[sampleCount++] = ms
}

/** @param {Float64Array} sorted @param {number} q */
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN

/**
 * Connects and writes `first`; `onData` sees every chunk until it returns true (done). Settles on done, close or
 * timeout.
 * @param {Load} load @param {Buffer} first
 * @param {(socket: net.Socket, chunk: Buffer) => boolean} onData
 * @returns {Promise<net.Socket>}
 */
const exchange = (load, first, onData) =>
  new Promise((resolve, reject) => {
    const socket = net.connect({ port: load.port, host: "127.0.0.1", localAddress: sourceAddress(), noDelay: true })
    sockets.add(socket)
    const timer = setTimeout(() => finish(new Error("timed out")), ATTEMPT_TIMEOUT_MS)
    let settled = false
    /** @param {Error} [error] */
    const finish = (error) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.off("data", data)
      if (error !== undefined) {
        socket.destroy()
        return reject(error)
      }
      // Later bytes wait in the socket until the caller has attached its own listener and resumed.
      socket.pause()
      resolve(socket)
    }
    const data = (/** @type {Buffer} */ chunk) => {
      if (onData(socket, chunk)) finish()
    }
    socket.on("data", data)
    socket.once("close", () => {
      sockets.delete(socket)
      finish(new Error("closed early"))
    })
    socket.on("error", () => {})
    socket.write(first)
  })

/**
 * The Encryption Request at the start of `buffer` (VarInt length, id 1, serverId, public key, verify token), or
 * undefined while it is incomplete.
 * @param {Buffer} buffer
 */
const encryptionRequest = (buffer) => {
  const frame = readFrame(buffer)
  if (frame === undefined) return undefined
  let at = 0
  /** @returns {Buffer} */
  const array = () => {
    let length = 0
    let shift = 0
    for (let byte = 0x80; (byte & 0x80) !== 0; shift += 7) {
      byte = /** @type {number} */ (frame.body[at++])
      length |= (byte & 0x7f) << shift
    }
    const out = frame.body.subarray(at, at + length)
    at += length
    return out
  }
  array()
  const publicKey = array()
  const verifyToken = array()
  return { publicKey, verifyToken, end: frame.end }
}

/**
 * An online-mode login (client_only): answers the Encryption Request with a fresh secret (no session service call:
 * the bench's fake one says yes to every name), then reads decrypted bytes until the backend's first bytes arrived.
 * @param {Load} load @param {string} name
 */
const onlineLogin = async (load, name) => {
  /** @type {Buffer} */
  let buffer = Buffer.alloc(0)
  /** @type {import("node:crypto").Decipher | undefined} */
  let decipher
  let plain = Buffer.alloc(0)
  const socket = await exchange(load, Buffer.concat([handshake(load.host, load.port, NEXT_LOGIN), loginStart(name)]), (socket, chunk) => {
    if (decipher !== undefined) {
      plain = Buffer.concat([plain, decipher.update(chunk)])
      return plain.length >= FIRST_BYTES.length
    }
    buffer = Buffer.concat([buffer, chunk])
    const request = encryptionRequest(buffer)
    if (request === undefined) return false
    const secret = randomBytes(16)
    const key = { key: request.publicKey, format: /** @type {const} */ ("der"), type: /** @type {const} */ ("spki"), padding: constants.RSA_PKCS1_PADDING }
    const encryptedSecret = publicEncrypt(key, secret)
    const encryptedToken = publicEncrypt(key, request.verifyToken)
    // 128-byte arrays: VarInt 128 is 0x80 0x01.
    const body = Buffer.concat([Buffer.from([0x80, 0x01]), encryptedSecret, Buffer.from([0x80, 0x01]), encryptedToken])
    socket.write(frame(0x01, body))
    // Only Portal's side is read from now on: this session writes nothing more, so it needs no cipher of its own.
    decipher = createDecipheriv("aes-128-cfb8", secret, secret)
    const rest = buffer.subarray(request.end)
    if (rest.length > 0) plain = decipher.update(rest)
    return plain.length >= FIRST_BYTES.length
  })
  return { socket, rest: plain.subarray(FIRST_BYTES.length) }
}

/**
 * Logs in as `name`; resolves once the backend's first bytes arrived, with what came after them.
 * @param {Load} load @param {string} name
 */
const login = async (load, name) => {
  if (load.online === true) return onlineLogin(load, name)
  /** @type {Buffer} */
  let buffer = Buffer.alloc(0)
  const socket = await exchange(load, Buffer.concat([handshake(load.host, load.port, NEXT_LOGIN), loginStart(name)]), (_, chunk) => {
    buffer = Buffer.concat([buffer, chunk])
    return buffer.length >= FIRST_BYTES.length
  })
  return { socket, rest: buffer.subarray(FIRST_BYTES.length) }
}

/** A status request, then a ping once the answer is in, as a client's server list does. @param {Load} load */
const statusPing = async (load) => {
  /** @type {Buffer} */
  let buffer = Buffer.alloc(0)
  let answered = false
  const socket = await exchange(load, Buffer.concat([handshake(load.host, load.port, NEXT_STATUS), STATUS_REQUEST]), (socket, chunk) => {
    buffer = Buffer.concat([buffer, chunk])
    if (!answered) {
      const answer = readFrame(buffer)
      if (answer === undefined) return false
      answered = true
      buffer = buffer.subarray(answer.end)
      socket.write(ping(BigInt(completed)))
    }
    return buffer.length >= PONG_BYTES
  })
  socket.destroy()
}

/** Runs `attempt` in `concurrency` loops until stopped. @param {number} concurrency @param {() => Promise<unknown>} attempt */
const loops = (concurrency, attempt) => {
  const loop = async () => {
    while (!stopped) {
      try {
        await attempt()
        completed++
      } catch (error) {
        if (!stopped) fail(error)
      }
    }
  }
  for (let i = 0; i < concurrency; i++) void loop()
}

/**
 * Opens `count` sessions, at most `concurrency` logins at a time; a failed login counts as an error.
 * @param {Load} load @param {string} name
 * @returns {Promise<Array<{ socket: net.Socket, rest: Buffer }>>}
 */
const openSessions = async (load, name) => {
  /** @type {Array<{ socket: net.Socket, rest: Buffer }>} */
  const opened = []
  let next = 0
  const worker = async () => {
    while (next < load.count && !stopped) {
      next++
      try {
        opened.push(await login(load, name))
      } catch (error) {
        fail(error)
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(load.concurrency, load.count) }, worker))
  return opened
}

/** `count` connections (one unless given), each writing and reading as fast as it can. @param {Load} load */
const bulk = async (load) => {
  const one = async () => {
    const { socket, rest } = await login(load, "bulk")
    received += rest.length
    socket.on("data", (chunk) => (received += chunk.length))
    const pump = () => {
      while (socket.writable && socket.write(BULK_CHUNK));
    }
    socket.on("drain", pump)
    socket.resume()
    pump()
  }
  await Promise.all(Array.from({ length: Math.max(1, load.count) }, one))
}

/**
 * Each session sends one packet every 50 ms, phases spread evenly, stamped with the send time; the round trip is
 * measured when the echo comes back.
 * @param {Load} load
 */
const game = async (load) => {
  const sessions = (await openSessions(load, "echo")).map(({ socket, rest }) => {
    let carry = rest
    socket.on("data", (chunk) => {
      carry = carry.length === 0 ? chunk : Buffer.concat([carry, chunk])
      const now = performance.now()
      let at = 0
      for (; at + GAME_PACKET_BYTES <= carry.length; at += GAME_PACKET_BYTES) record(now - carry.readDoubleLE(at))
      carry = carry.subarray(at)
    })
    socket.resume()
    return socket
  })
  if (sessions.length === 0) throw new Error(`no game session could log in: ${firstError}`)
  const startedAt = performance.now()
  let sent = 0
  ticker = setInterval(() => {
    const due = Math.floor(((performance.now() - startedAt) / GAME_PERIOD_MS) * sessions.length)
    for (; sent < due; sent++) {
      const socket = /** @type {net.Socket} */ (sessions[sent % sessions.length])
      const packet = Buffer.allocUnsafe(GAME_PACKET_BYTES).fill(0x33)
      packet.writeDoubleLE(performance.now())
      socket.write(packet)
    }
  }, 1)
}

let rateLogins = 0

serve({
  start: async (request) => {
    const load = /** @type {Load & { mode: string }} */ (/** @type {unknown} */ (request))
    switch (load.mode) {
      case "bulk":
        return bulk(load)
      case "game":
        return game(load)
      case "idle":
        return (await openSessions(load, "idle")).length
      case "rate":
        // A name per login: Portal lets one session per player into the packet modes, and logins overlap.
        return loops(load.concurrency, async () => (await login(load, `rate${rateLogins++ % 1_000_000}`)).socket.destroy())
      case "status":
        return loops(load.concurrency, () => statusPing(load))
      default:
        throw new Error(`unknown mode ${load.mode}`)
    }
  },
  snapshot: () => {
    const sorted = samples.slice(0, sampleCount).sort()
    sampleCount = 0
    return {
      received,
      completed,
      errors,
      firstError,
      open: sockets.size,
      rtt: { count: sorted.length, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) }
    }
  },
  stop: () => {
    stopped = true
    clearInterval(ticker)
    for (const socket of sockets) socket.destroy()
    return null
  }
})
