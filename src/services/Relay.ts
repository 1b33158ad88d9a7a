/**
 * Relay: moves bytes between a player and a backend after the handshake with Node streams both ways (backpressure
 * holds; no Effect per chunk), or in the kernel with splice(2) for `zero_copy`. Both sockets close when either
 * side ends, after the bytes in flight (a backend's kick message, say) have been delivered.
 * One watchdog timer for all sessions enforces the backend `read` and `write` timeouts.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { Socket } from "node:net"
import type { SessionByteSource } from "./PlayerRegistry.js"
import { type Direction, forward } from "./relay/forwarder.js"
import { counterAt, type SpliceResult, spliceSupport, startSplice } from "./relay/zeroCopy.js"

export type RelayEnd = "client_closed" | "backend_closed" | "read_timeout" | "write_timeout" | "error" | "interrupted"

export interface RelayOutcome {
  readonly end: RelayEnd
  readonly error?: string
}

/** Bytes from and to the player over the whole connection, readable at any time. */
export type ByteMeter = SessionByteSource

export interface RelayTimeouts {
  readonly readMs: number
  readonly writeMs: number
}

/** How long the other side may go on after one side ended cleanly. */
export const LINGER_MS = 2_000
/** Every session is checked once per period... */
const WATCHDOG_PERIOD_MS = 1_000
/** ...a slice of them per tick, so that thousands of sessions never stall the event loop at once. */
const WATCHDOG_SLICES = 10

/** What the watchdog reads of one relayed backend connection; filled in place, so a check allocates nothing. */
export interface ProgressSample {
  /** A value that changes whenever bytes are read from the backend (a count, or the time of the last read). */
  readMark: number
  /** Bytes the backend's socket handed to the kernel so far. */
  written: number
  /** Whether bytes wait behind a full send buffer. */
  blocked: boolean
}

export interface BackendProgress {
  readonly sample: (into: ProgressSample) => void
}

interface Watched {
  /** Cleared when the entry is deleted: see RelayWatchdog.delete. */
  progress: BackendProgress | undefined
  readonly timeouts: RelayTimeouts
  lastReadMark: number
  lastReadAt: number
  lastWritten: number
  /** When writes were first seen blocked with no progress since. */
  blockedSince: number | undefined
  onTimeout: ((end: "read_timeout" | "write_timeout") => void) | undefined
}

// Why the relay's collections let go of what an ended session held: V8 replaces a Set's or Map's table when it grows
// or compacts, and the old table keeps its entries and a pointer to the new one. Once that old table has moved to
// the old generation, young-generation collections treat it as live until the next full collection, so every session
// that was in the collection when a table was replaced would outlive its connection, and be copied and promoted on
// the way. At thousands of logins a second that was a third of all allocation. An entry that is emptied when it
// leaves keeps only itself alive.

/**
 * One timer for every relayed session: checks idle reads and stalled writes on the backend side. Each tick checks
 * the next slice of sessions, so each is checked about once per period and a timeout fires at most a period late.
 * Time is monotonic (performance.now()): a wall clock stepped forward must not time every player out at once.
 */
export class RelayWatchdog {
  private readonly watched = new Set<Watched>()
  private timer: NodeJS.Timeout | undefined
  /** Where the current pass stands; a Set iterator stays valid while entries come and go. */
  private pass: Iterator<Watched> | undefined
  private readonly sample: ProgressSample = { readMark: 0, written: 0, blocked: false }

  add(progress: BackendProgress, timeouts: RelayTimeouts, onTimeout: Watched["onTimeout"], now = performance.now()): Watched {
    const { sample } = this
    progress.sample(sample)
    const entry: Watched = {
      progress,
      timeouts,
      lastReadMark: sample.readMark,
      lastReadAt: now,
      lastWritten: sample.written,
      blockedSince: undefined,
      onTimeout
    }
    this.watched.add(entry)
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.tick(performance.now()), WATCHDOG_PERIOD_MS / WATCHDOG_SLICES)
      this.timer.unref()
    }
    return entry
  }

  delete(entry: Watched): void {
    this.watched.delete(entry)
    entry.progress = undefined
    entry.onTimeout = undefined
    if (this.watched.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer)
      this.timer = undefined
      this.pass = undefined
    }
  }

  get size(): number {
    return this.watched.size
  }

  /** Checks the next slice of sessions; a pass over all of them takes WATCHDOG_SLICES ticks. */
  tick(now: number): void {
    let budget = Math.ceil(this.watched.size / WATCHDOG_SLICES)
    while (budget-- > 0) {
      this.pass ??= this.watched.values()
      const next = this.pass.next()
      if (next.done === true) {
        this.pass = undefined
        return
      }
      this.check(next.value, now)
    }
  }

  private check(entry: Watched, now: number): void {
    const { sample } = this
    const { progress, onTimeout } = entry
    if (progress === undefined || onTimeout === undefined) return
    progress.sample(sample)
    if (sample.readMark !== entry.lastReadMark) {
      entry.lastReadMark = sample.readMark
      entry.lastReadAt = now
    } else if (now - entry.lastReadAt >= entry.timeouts.readMs) {
      onTimeout("read_timeout")
      return
    }
    if (!sample.blocked || sample.written !== entry.lastWritten) {
      entry.lastWritten = sample.written
      entry.blockedSince = sample.blocked ? now : undefined
    } else {
      entry.blockedSince ??= now
      if (now - entry.blockedSince >= entry.timeouts.writeMs) onTimeout("write_timeout")
    }
  }
}

const spliceEnd = (result: SpliceResult): RelayEnd =>
  result.reason === "cancelled" ? "interrupted" : result.reason === "error" ? "error" : result.reason

/** What a relay needs to start; `onEnd` runs once, after both sockets are destroyed. */
export interface RelayRequest {
  readonly client: Socket
  readonly backend: Socket
  readonly timeouts: RelayTimeouts
  /** Splice in the kernel (the caller checked that the addon is available). */
  readonly zeroCopy: boolean
  readonly onEnd: (outcome: RelayOutcome) => void
}

interface ActiveRelay {
  /** Ends the relay now (shutdown); the relay then reports through its onEnd. */
  readonly stop: () => void
  readonly meter: ByteMeter
}

/** An entry of the running relays: emptied when its relay ends (see the note above RelayWatchdog). */
interface Running {
  relay: ActiveRelay | undefined
}

/**
 * Ends and errors are handled here rather than by `stream.pipeline`, which destroys both sockets on the first
 * error: when side X ends, Y gets FIN after the last byte, Y's input is read and dropped until Y closes or the
 * linger ends, and only then are both destroyed. Closing a socket with unread input sends RST, and a Windows
 * client drops a kick message it got before an RST.
 */
const startPassthrough = (
  { client, backend, timeouts }: RelayRequest,
  watchdog: RelayWatchdog,
  finished: (outcome: RelayOutcome) => void
): ActiveRelay => {
  let done = false
  let firstEnd: RelayEnd | undefined
  let lingerTimer: NodeJS.Timeout | undefined

  const finish = (end: RelayEnd, error?: Error) => {
    if (done) return
    done = true
    clearTimeout(lingerTimer)
    watchdog.delete(watched)
    up.stop()
    down.stop()
    client.off("end", onClientEnd)
    backend.off("end", onBackendEnd)
    for (const socket of [client, backend]) {
      socket.off("error", onError).off("close", onClose)
      socket.destroy()
    }
    finished(error === undefined ? { end } : { end, error: error.message })
  }

  /** One side sent FIN: pass it on to `to` after the bytes in flight, drain `to`'s input, and linger. */
  const ended = (to: Socket, back: Direction, end: RelayEnd) => {
    if (firstEnd !== undefined) return finish(firstEnd)
    firstEnd = end
    back.discard()
    to.end()
    lingerTimer = setTimeout(() => finish(end), LINGER_MS)
    lingerTimer.unref()
  }
  const onClientEnd = () => ended(backend, down, "client_closed")
  const onBackendEnd = () => ended(client, up, "backend_closed")
  // After a clean end, a reset of the lingering side is expected and not reported as an error.
  const onError = (error: Error) => finish(firstEnd ?? "error", firstEnd === undefined ? error : undefined)
  const onClose = () => finish(firstEnd ?? (client.destroyed ? "client_closed" : "backend_closed"))

  const outBefore = client.bytesWritten
  const up = forward(client, backend)
  const down = forward(backend, client)

  const watched = watchdog.add(
    {
      sample: (into) => {
        into.readMark = down.bytesRead
        into.written = up.bytesHanded - backend.writableLength
        into.blocked = backend.writableNeedDrain
      }
    },
    timeouts,
    (end) => finish(end)
  )
  // `on`, not `once`: each fires once anyway, and `once` adds a wrapper and its state per listener per player.
  client.on("end", onClientEnd)
  backend.on("end", onBackendEnd)
  for (const socket of [client, backend]) socket.on("error", onError).on("close", onClose)
  return {
    stop: () => finish("interrupted"),
    // Node counts what it read and what went through its writes; the relay's direct sends are counted by `down`.
    meter: { bytesIn: () => client.bytesRead, bytesOut: () => outBefore + down.bytesHanded }
  }
}

/** Hands both sockets to the splice(2) addon; the addon's completion ends the relay. */
const startZeroCopy = (
  { client, backend, timeouts }: RelayRequest,
  watchdog: RelayWatchdog,
  finished: (outcome: RelayOutcome) => void
): ActiveRelay => {
  // Bytes Node read but did not deliver yet are moved (and counted) by the addon: count them once.
  const inBefore = client.bytesRead - client.readableLength
  const outBefore = client.bytesWritten
  let timedOut: RelayEnd | undefined
  // Runs once, after both sockets are destroyed; never during startSplice itself.
  const session = startSplice(client, backend, (result) => {
    watchdog.delete(watched)
    const end = timedOut ?? spliceEnd(result)
    finished(result.error !== undefined && timedOut === undefined ? { end, error: result.error } : { end })
  })
  const watched = watchdog.add(
    {
      // The addon reports the time of the last read, not a count: a value that moves with it is enough.
      sample: (into) => {
        const stats = session.counters()
        into.readMark = counterAt(stats, "lastBackendReadMs")
        into.written = counterAt(stats, "clientToBackend") - counterAt(stats, "pendingToBackend")
        into.blocked = counterAt(stats, "pendingToBackend") > 0
      }
    },
    timeouts,
    (end) => {
      timedOut ??= end
      session.cancel()
    }
  )
  return {
    stop: () => session.cancel(),
    // Once the session has ended, stats() holds its final counts.
    meter: {
      bytesIn: () => inBefore + session.stats().clientToBackend,
      bytesOut: () => outBefore + session.stats().backendToClient
    }
  }
}

export class Relay extends Effect.Service<Relay>()("portal/Relay", {
  scoped: Effect.gen(function* () {
    const watchdog = new RelayWatchdog()
    const active = new Set<Running>()
    let whenIdle: Array<() => void> = []

    /**
     * Starts relaying and returns at once: the relay lives on its own (a suspended fiber per player would cost
     * more memory than the player's sockets) and reports through `onEnd`. The service's scope ends the relays
     * still running when Portal stops.
     */
    const startNow = (request: RelayRequest): ByteMeter => {
      const running: Running = { relay: undefined }
      let ended = false
      const finished = (outcome: RelayOutcome) => {
        ended = true
        active.delete(running)
        running.relay = undefined
        if (active.size === 0) {
          const waiting = whenIdle
          whenIdle = []
          for (const resolve of waiting) resolve()
        }
        request.onEnd(outcome)
      }
      const relay = request.zeroCopy ? startZeroCopy(request, watchdog, finished) : startPassthrough(request, watchdog, finished)
      // A relay that ended while starting has already reported; it must not linger in `active`.
      if (!ended) {
        running.relay = relay
        active.add(running)
      }
      return relay.meter
    }
    const start = (request: RelayRequest): Effect.Effect<ByteMeter> => Effect.sync(() => startNow(request))

    /** Waits until no relay is running (or the effect is interrupted). */
    const awaitIdle = Effect.async<void>((resume) => {
      if (active.size === 0) return resume(Effect.void)
      const resolve = () => resume(Effect.void)
      whenIdle.push(resolve)
      return Effect.sync(() => {
        whenIdle = whenIdle.filter((entry) => entry !== resolve)
      })
    })

    // Shutdown: end every relay, then give the splice addon a moment to let go of its descriptors.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        for (const running of [...active]) running.relay?.stop()
        yield* awaitIdle.pipe(Effect.interruptible, Effect.timeoutOption(Duration.seconds(2)))
      })
    )

    return {
      start,
      /** `start`, synchronously. */
      startNow,
      awaitIdle,
      active: Effect.sync(() => active.size),
      /** Whether zero_copy can really splice here; servers asking for it relay as passthrough otherwise. */
      zeroCopySupport: spliceSupport,
      watchdog
    }
  })
}) {}

export const relayTimeouts = (read: Duration.Duration, write: Duration.Duration): RelayTimeouts => ({
  readMs: Duration.toMillis(read),
  writeMs: Duration.toMillis(write)
})
