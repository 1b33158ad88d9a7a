// @ts-check
/**
 * The hostile flood, a forked child: connections that each start with a PROXY v1 header naming one of FLOOD_ADDRESSES
 * client addresses (10.0.0.0/8, taken in turn), then misbehave in one of four ways:
 *   garbage      bytes that are no Minecraft packet, then the end;
 *   legacy ping  a 1.4-1.5 server-list ping (FE 01), answered in the legacy kick format;
 *   half         the first half of a handshake, then nothing until the proxy gives up (its handshake timeout);
 *   slowloris    a handshake one byte a second, until the proxy gives up.
 * Garbage and legacy pings run in `concurrency` loops, one connection after another; half handshakes and slowloris
 * in `held` loops each, every connection kept until the proxy closes it.
 *
 * The probe, a second child (`mode: "probe"`): a real client through the same proxy, with the PROXY header of an
 * address outside the flood's (each attempt a new one, so that [rate_limit] never counts two), a status ping every
 * 250 ms and a login every second. Every attempt that fails or takes longer than PROBE_TIMEOUT_MS is counted.
 */
import * as net from "node:net"
import { serve } from "./ipc.mjs"
import { FIRST_BYTES, handshake, loginStart, NEXT_LOGIN, NEXT_STATUS, ping, readFrame, STATUS_REQUEST } from "./wire.mjs"

export const FLOOD_ADDRESSES = 60_000
const HOLD_LIMIT_MS = 30_000
const PROBE_TIMEOUT_MS = 2_000
const GARBAGE = Buffer.from(Array.from({ length: 200 }, (_, i) => (i * 151 + 7) & 0xff))
const LEGACY_PING = Buffer.from([0xfe, 0x01])

/** @typedef {{ port: number, host: string, concurrency: number, held: number, mode: string }} Load */

let stopped = false
/** @type {Set<net.Socket>} */
const sockets = new Set()
const counts = { garbage: 0, legacy: 0, legacyAnswered: 0, half: 0, slowloris: 0, errors: 0 }
/** @type {{ pings: number, logins: number, failed: number, slowestMs: number, firstFailure: string | undefined }} */
const probe = { pings: 0, logins: 0, failed: 0, slowestMs: 0, firstFailure: undefined }

let nextAddress = 0
const floodAddress = () => {
  const i = nextAddress
  nextAddress = (nextAddress + 1) % FLOOD_ADDRESSES
  return `10.${(i >> 16) & 0xff}.${(i >> 8) & 0xff}.${i & 0xff}`
}
let nextProbe = 0
const probeAddress = () => {
  nextProbe = (nextProbe + 1) % (250 * 250)
  return `192.168.${Math.floor(nextProbe / 250) + 1}.${(nextProbe % 250) + 1}`
}
/** Connections leave from many loopback addresses, so that no source runs out of ports. */
let nextSource = 0
const sourceAddress = () => {
  nextSource = (nextSource + 1) % (254 * 254)
  return `127.2.${Math.floor(nextSource / 254) + 1}.${(nextSource % 254) + 1}`
}

/** @param {string} client @param {number} port */
const proxyHeader = (client, port) => Buffer.from(`PROXY TCP4 ${client} 127.0.0.1 ${40000 + (port % 20000)} ${port}\r\n`)

/**
 * Opens a connection, writes `first`, and resolves when the proxy closes it (or after `limitMs`); `onData` sees what
 * arrives, `onOpen` may keep writing.
 * @param {Load} load @param {Buffer} first @param {number} limitMs
 * @param {{ onData?: (chunk: Buffer, socket: net.Socket) => void, onOpen?: (socket: net.Socket) => void }} [hooks]
 * @returns {Promise<void>}
 */
const connection = (load, first, limitMs, hooks = {}) =>
  new Promise((resolve) => {
    const socket = net.connect({ port: load.port, host: "127.0.0.1", localAddress: sourceAddress() })
    sockets.add(socket)
    const timer = setTimeout(() => socket.destroy(), limitMs)
    socket.on("error", () => {})
    socket.on("data", (chunk) => hooks.onData?.(chunk, socket))
    socket.once("close", () => {
      clearTimeout(timer)
      sockets.delete(socket)
      resolve()
    })
    socket.once("connect", () => {
      socket.write(first)
      hooks.onOpen?.(socket)
    })
  })

/** @param {Load} load */
const garbage = (load) => {
  counts.garbage++
  return connection(load, Buffer.concat([proxyHeader(floodAddress(), load.port), GARBAGE]), 2_000, { onOpen: (socket) => socket.end() })
}

/** @param {Load} load */
const legacyPing = (load) => {
  counts.legacy++
  let answered = false
  return connection(load, Buffer.concat([proxyHeader(floodAddress(), load.port), LEGACY_PING]), 2_000, {
    onData: (_, socket) => {
      if (!answered) counts.legacyAnswered++
      answered = true
      socket.end()
    }
  })
}

/** @param {Load} load */
const halfHandshake = (load) => {
  counts.half++
  const bytes = handshake(load.host, load.port, NEXT_LOGIN)
  return connection(load, Buffer.concat([proxyHeader(floodAddress(), load.port), bytes.subarray(0, bytes.length >> 1)]), HOLD_LIMIT_MS)
}

/** @param {Load} load */
const slowloris = (load) => {
  counts.slowloris++
  const bytes = handshake(load.host, load.port, NEXT_LOGIN)
  let sent = 0
  /** @type {NodeJS.Timeout | undefined} */
  let drip
  return connection(load, proxyHeader(floodAddress(), load.port), HOLD_LIMIT_MS, {
    onOpen: (socket) => {
      drip = setInterval(() => {
        if (sent < bytes.length && socket.writable) socket.write(bytes.subarray(sent, ++sent))
      }, 1_000)
      socket.once("close", () => clearInterval(drip))
    }
  })
}

/** @param {number} count @param {() => Promise<void>} attempt */
const loops = (count, attempt) => {
  const loop = async () => {
    while (!stopped) {
      try {
        await attempt()
      } catch {
        counts.errors++
      }
    }
  }
  for (let i = 0; i < count; i++) void loop()
}

/** @param {Load} load */
const flood = (load) => {
  loops(load.concurrency, () => garbage(load))
  loops(load.concurrency, () => legacyPing(load))
  loops(load.held, () => halfHandshake(load))
  loops(load.held, () => slowloris(load))
}

/**
 * One probe attempt: resolves once `done` says the answer is complete; fails on close, error or timeout.
 * @param {Load} load @param {Buffer} first @param {(received: Buffer) => boolean} done
 */
const probeAttempt = (load, first, done) =>
  new Promise((resolve, reject) => {
    const started = performance.now()
    const socket = net.connect({ port: load.port, host: "127.0.0.1" })
    let received = Buffer.alloc(0)
    let settled = false
    /** @param {Error | undefined} error */
    const finish = (error) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      if (error === undefined) resolve(performance.now() - started)
      else reject(error)
    }
    const timer = setTimeout(() => finish(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS)
    socket.on("error", (error) => finish(error))
    socket.once("close", () => finish(new Error("closed before the answer")))
    socket.on("data", (chunk) => {
      received = Buffer.concat([received, chunk])
      if (done(received)) finish(undefined)
    })
    socket.once("connect", () => socket.write(Buffer.concat([proxyHeader(probeAddress(), load.port), first])))
  })

/** @param {Load} load */
const probeLoop = (load) => {
  /** @param {"pings" | "logins"} kind @param {Promise<number>} attempt */
  const count = (kind, attempt) =>
    attempt.then(
      (ms) => {
        probe[kind]++
        probe.slowestMs = Math.max(probe.slowestMs, ms)
      },
      (error) => {
        probe.failed++
        probe.firstFailure ??= `${kind}: ${error instanceof Error ? error.message : String(error)}`
      }
    )
  const statusFirst = Buffer.concat([handshake(load.host, load.port, NEXT_STATUS), STATUS_REQUEST, ping(1n)])
  const loginFirst = Buffer.concat([handshake(load.host, load.port, NEXT_LOGIN), loginStart("rate")])
  let tick = 0
  const timer = setInterval(() => {
    if (stopped) return clearInterval(timer)
    void count(
      "pings",
      probeAttempt(load, statusFirst, (received) => {
        const answer = readFrame(received)
        return answer !== undefined && readFrame(received.subarray(answer.end)) !== undefined
      })
    )
    if (tick++ % 4 === 0) void count("logins", probeAttempt(load, loginFirst, (received) => received.length >= FIRST_BYTES.length))
  }, 250)
}

serve({
  start: (request) => {
    const load = /** @type {Load} */ (/** @type {unknown} */ (request))
    if (load.mode === "probe") probeLoop(load)
    else flood(load)
    return null
  },
  snapshot: () => ({ ...counts, open: sockets.size, probe: { ...probe } }),
  stop: () => {
    stopped = true
    for (const socket of sockets) socket.destroy()
    return null
  }
})
