/**
 * The relay watchdog: one timer for every relayed session enforces the backend `read` and `write` timeouts
 * (`[timeouts]`), whatever relay mode moves the bytes, and bounds a player that takes nothing by `write` too.
 *
 * While bytes wait for the player behind a full send buffer, Portal stops reading the backend (backpressure), so the
 * backend's silence then is Portal's doing: the read clock waits, and the player's stall is timed instead. A player
 * whose client stopped reading is then ended as `player_timeout`, not blamed on the backend as a read timeout.
 */
import * as Duration from "effect/Duration"

export interface RelayTimeouts {
  readonly readMs: number
  readonly writeMs: number
}

export const relayTimeouts = (read: Duration.Duration, write: Duration.Duration): RelayTimeouts => ({
  readMs: Duration.toMillis(read),
  writeMs: Duration.toMillis(write)
})

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
  /** Bytes the player's socket handed to the kernel so far. */
  playerWritten: number
  /** Whether bytes wait for the player (behind a full send buffer, or in zero_copy's pipe). */
  playerBlocked: boolean
}

export interface BackendProgress {
  readonly sample: (into: ProgressSample) => void
}

export interface Watched {
  /** Cleared when the entry is deleted: see RelayWatchdog.delete. */
  progress: BackendProgress | undefined
  readonly timeouts: RelayTimeouts
  lastReadMark: number
  lastReadAt: number
  lastWritten: number
  /** When writes were first seen blocked with no progress since. */
  blockedSince: number | undefined
  lastPlayerWritten: number
  /** When writes to the player were first seen blocked with no progress since. */
  playerBlockedSince: number | undefined
  onTimeout: ((end: WatchdogEnd) => void) | undefined
}

export type WatchdogEnd = "read_timeout" | "write_timeout" | "player_timeout"

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
  private readonly sample: ProgressSample = { readMark: 0, written: 0, blocked: false, playerWritten: 0, playerBlocked: false }

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
      lastPlayerWritten: sample.playerWritten,
      playerBlockedSince: undefined,
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
    if (!sample.playerBlocked || sample.playerWritten !== entry.lastPlayerWritten) {
      entry.lastPlayerWritten = sample.playerWritten
      entry.playerBlockedSince = sample.playerBlocked ? now : undefined
    } else {
      entry.playerBlockedSince ??= now
      if (now - entry.playerBlockedSince >= entry.timeouts.writeMs) {
        onTimeout("player_timeout")
        return
      }
    }
    if (sample.readMark !== entry.lastReadMark || sample.playerBlocked) {
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
