/**
 * The splice relay mode (`zero_copy`): both sockets are handed to the splice(2) addon and bytes move inside the
 * kernel (relay/zeroCopy.ts); the addon's completion ends the relay. Chosen only where the addon loaded
 * (relay/modes.ts decides).
 */
import { encodeLoginDisconnect } from "../../protocol/login.js"
import { loadNativeAddon, type SpliceResult } from "../native/addon.js"
import { tcpFdOf } from "../native/tcpHandle.js"
import type { LiveRelay, RelayEnd, RelayMode, RelayStart } from "./RelayMode.js"
import type { RelayWatchdog } from "./watchdog.js"
import { counterAt, startSplice } from "./zeroCopy.js"

const endOf = (result: SpliceResult): RelayEnd => (result.reason === "cancelled" ? "ended" : result.reason)

/** Sends `bytes` at once on the socket's descriptor; whether the kernel took all of them. */
const sendNow = (fd: number | undefined, bytes: Buffer): boolean => {
  const loaded = loadNativeAddon()
  if (fd === undefined || !("addon" in loaded)) return false
  return loaded.addon.send(fd, bytes, bytes.length) === bytes.length
}

const start = ({ client, backend, timeouts, onEnd }: RelayStart, watchdog: RelayWatchdog): LiveRelay => {
  // Bytes Node read but did not deliver yet are moved (and counted) by the addon: count them once.
  const inBefore = client.bytesRead - client.readableLength
  const outBefore = client.bytesWritten
  const clientFd = tcpFdOf(client)
  let timedOut: RelayEnd | undefined
  let endedBecause: string | undefined
  // Runs once, after both sockets are destroyed; never during startSplice itself.
  const session = startSplice(client, backend, (result) => {
    watchdog.delete(watched)
    if (endedBecause !== undefined) return onEnd({ end: "ended", detail: endedBecause })
    const end = timedOut ?? endOf(result)
    onEnd(result.error !== undefined && timedOut === undefined ? { end, detail: result.error } : { end })
  })
  const watched = watchdog.add(
    {
      // The addon reports the time of the last read, not a count: a value that moves with it is enough.
      sample: (into) => {
        const stats = session.counters()
        into.readMark = counterAt(stats, "lastBackendReadMs")
        into.written = counterAt(stats, "clientToBackend") - counterAt(stats, "pendingToBackend")
        into.blocked = counterAt(stats, "pendingToBackend") > 0
        into.playerWritten = counterAt(stats, "backendToClient") - counterAt(stats, "pendingToClient")
        into.playerBlocked = counterAt(stats, "pendingToClient") > 0
      }
    },
    timeouts,
    // Once a side has ended, the addon's flush deadline decides: a timeout then would misname the end.
    (end) => {
      if (counterAt(session.counters(), "closing") === 1) return
      timedOut ??= end
      session.cancel()
    }
  )
  return {
    // Once the session has ended, stats() holds its final counts.
    meter: {
      bytesIn: () => inBefore + session.stats().clientToBackend,
      bytesOut: () => outBefore + session.stats().backendToClient
    },
    end: (reason) => {
      if (endedBecause !== undefined || timedOut !== undefined) return
      endedBecause = reason
      // Nothing from the backend reached the player yet: still the login state, so a Disconnect is understood.
      // Sent straight to the descriptor, ahead of the cancel's flush (which has nothing to flush toward the player).
      const stats = session.stats()
      if (stats.backendToClient === 0 && stats.pendingToClient === 0) sendNow(clientFd, encodeLoginDisconnect(reason))
      session.cancel()
    }
  }
}

export const spliceMode: RelayMode = { name: "zero_copy", kind: "raw", authenticates: false, start }
