/**
 * Relay: moves bytes between a player and a backend after the handshake, with Node stream `pipeline` both ways
 * (backpressure holds; no Effect per chunk). Both sockets close when either side ends: the other direction gets a
 * short linger to deliver what is in flight (a backend's kick message, say), then both are destroyed.
 * One watchdog timer for all sessions enforces the backend `read` and `write` timeouts.
 */
import { Duration, Effect } from "effect"
import type { Socket } from "node:net"
import { pipeline } from "node:stream"

export type RelayEnd = "client_closed" | "backend_closed" | "read_timeout" | "write_timeout" | "error" | "interrupted"

export interface RelayOutcome {
  readonly end: RelayEnd
  readonly error?: string
}

export interface RelayTimeouts {
  readonly readMs: number
  readonly writeMs: number
}

/** How long the second direction may run after the first ended cleanly. */
export const LINGER_MS = 2_000
const WATCHDOG_PERIOD_MS = 1_000

interface Watched {
  readonly backend: Socket
  readonly timeouts: RelayTimeouts
  lastBytesRead: number
  lastReadAt: number
  /** When the backend's write buffer was last seen full without a drain since. */
  stalledSince: number | undefined
  readonly onTimeout: (end: "read_timeout" | "write_timeout") => void
}

/** One timer for every relayed session: checks idle reads and stalled writes on the backend sockets. */
export class RelayWatchdog {
  private readonly watched = new Set<Watched>()
  private timer: NodeJS.Timeout | undefined

  add(entry: Watched): void {
    this.watched.add(entry)
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.sweep(Date.now()), WATCHDOG_PERIOD_MS)
      this.timer.unref()
    }
  }

  delete(entry: Watched): void {
    this.watched.delete(entry)
    if (this.watched.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer)
      this.timer = undefined
    }
  }

  get size(): number {
    return this.watched.size
  }

  sweep(now: number): void {
    for (const entry of this.watched) {
      const { backend, timeouts } = entry
      if (backend.bytesRead !== entry.lastBytesRead) {
        entry.lastBytesRead = backend.bytesRead
        entry.lastReadAt = now
      } else if (now - entry.lastReadAt >= timeouts.readMs) {
        entry.onTimeout("read_timeout")
        continue
      }
      if (backend.writableNeedDrain) {
        entry.stalledSince ??= now
        if (now - entry.stalledSince >= timeouts.writeMs) entry.onTimeout("write_timeout")
      } else {
        entry.stalledSince = undefined
      }
    }
  }
}

export class Relay extends Effect.Service<Relay>()("portal/Relay", {
  effect: Effect.sync(() => {
    const watchdog = new RelayWatchdog()

    /**
     * Relays until either side ends; resolves with why. Interrupting it destroys both sockets.
     * The caller has already written the handshake (and Login Start) to the backend.
     */
    const passthrough = (client: Socket, backend: Socket, timeouts: RelayTimeouts): Effect.Effect<RelayOutcome> =>
      Effect.async<RelayOutcome>((resume) => {
        let finished = false
        let firstEnd: RelayEnd | undefined
        let lingerTimer: NodeJS.Timeout | undefined
        let directionsDone = 0

        const finish = (end: RelayEnd, error?: Error) => {
          if (finished) return
          finished = true
          clearTimeout(lingerTimer)
          watchdog.delete(watched)
          client.destroy()
          backend.destroy()
          resume(Effect.succeed(error === undefined ? { end } : { end, error: error.message }))
        }

        const directionDone = (end: RelayEnd) => (error: Error | null | undefined) => {
          directionsDone += 1
          if (finished) return
          if (firstEnd === undefined) {
            if (error) return finish("error", error)
            firstEnd = end
            if (directionsDone === 2) return finish(end)
            lingerTimer = setTimeout(() => finish(end), LINGER_MS)
            lingerTimer.unref()
            return
          }
          // The second direction after a clean first end: errors here (EPIPE on a closed peer) are expected.
          finish(firstEnd)
        }

        const watched: Watched = {
          backend,
          timeouts,
          lastBytesRead: backend.bytesRead,
          lastReadAt: Date.now(),
          stalledSince: undefined,
          onTimeout: (end) => finish(end)
        }
        watchdog.add(watched)
        pipeline(client, backend, directionDone("client_closed"))
        pipeline(backend, client, directionDone("backend_closed"))
        return Effect.sync(() => finish("interrupted"))
      })

    return { passthrough, watchdog }
  })
}) {}

export const relayTimeouts = (read: Duration.Duration, write: Duration.Duration): RelayTimeouts => ({
  readMs: Duration.toMillis(read),
  writeMs: Duration.toMillis(write)
})
