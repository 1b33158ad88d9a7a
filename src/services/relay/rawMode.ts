/**
 * The raw relay mode (`passthrough`, `server_only`): bytes move through Node both ways with backpressure, each
 * direction by the forwarder (relay/forwarder.ts); nothing is parsed.
 *
 * Ends and errors are handled here rather than by `stream.pipeline`, which destroys both sockets on the first error:
 * when side X ends, Y gets FIN after the last byte, Y's input is read and dropped until Y closes or the linger ends,
 * and only then are both destroyed. Closing a socket with unread input sends RST, and a Windows client drops a kick
 * message it got before an RST.
 */
import { encodeLoginDisconnect } from "../../protocol/login.js"
import { forward, type Direction } from "./forwarder.js"
import { LINGER_MS, type LiveRelay, type RelayEnd, type RelayMode, type RelayOutcome, type RelayStart } from "./RelayMode.js"
import type { RelayWatchdog } from "./watchdog.js"
import { sendMark } from "./sendMark.js"

/** What a peer's connection failing looks like (the codes the splice addon reports as that side closing). */
const CONNECTION_ERRORS: ReadonlySet<string> = new Set([
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "ECONNABORTED",
  "ENOTCONN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
  "EHOSTDOWN"
])

const start = ({ client, backend, timeouts, onEnd }: RelayStart, watchdog: RelayWatchdog): LiveRelay => {
  let done = false
  let firstEnd: RelayEnd | undefined
  let lingerTimer: NodeJS.Timeout | undefined
  /** Why the session was ended from outside, once it was. */
  let endedBecause: string | undefined

  const finish = (end: RelayEnd, detail: string | undefined = endedBecause) => {
    if (done) return
    done = true
    clearTimeout(lingerTimer)
    watchdog.delete(watched)
    up.stop()
    down.stop()
    client.off("end", onClientEnd)
    backend.off("end", onBackendEnd)
    client.off("error", onClientError).off("close", onClientClose)
    backend.off("error", onBackendError).off("close", onBackendClose)
    client.destroy()
    backend.destroy()
    const outcome: RelayOutcome = detail === undefined ? { end } : { end, detail }
    onEnd(outcome)
  }

  /** One side sent FIN: pass it on to `to` after the bytes in flight, drain `to`'s input, and linger. */
  const ended = (to: typeof client, back: Direction, end: RelayEnd) => {
    if (firstEnd !== undefined) return finish(firstEnd)
    firstEnd = end
    back.discard()
    to.end()
    lingerTimer = setTimeout(() => finish(end), LINGER_MS)
    lingerTimer.unref()
  }
  const onClientEnd = () => ended(backend, down, "client_closed")
  const onBackendEnd = () => ended(client, up, "backend_closed")
  /**
   * A side's connection failing (a reset, a timeout) is that side closing, named with the code, as zero_copy reports
   * it; anything else is an error. After a clean end, a reset of the lingering side is expected and not reported.
   */
  const failed = (side: "client_closed" | "backend_closed", error: Error) => {
    if (firstEnd !== undefined) return finish(firstEnd)
    const code = (error as NodeJS.ErrnoException).code
    if (code !== undefined && CONNECTION_ERRORS.has(code)) return finish(side, code)
    finish("error", error.message)
  }
  const onClientError = (error: Error) => failed("client_closed", error)
  const onBackendError = (error: Error) => failed("backend_closed", error)
  /**
   * Node closes a socket once it has ended both ways: the side that ended first (its FIN answered with ours) or the
   * backend destroyed to end the session. That close is expected; the other side's lingering decides the finish.
   */
  const onClientClose = () => {
    if (firstEnd !== "client_closed") finish(firstEnd ?? "client_closed")
  }
  const onBackendClose = () => {
    if (firstEnd !== "backend_closed" && firstEnd !== "ended") finish(firstEnd ?? "backend_closed")
  }

  const outBefore = client.bytesWritten
  const up = forward(client, backend)
  const down = forward(backend, client)

  const watched = watchdog.add(
    {
      sample: (into) => {
        into.readMark = down.bytesRead
        into.blocked = backend.writableNeedDrain
        into.written = sendMark(backend, up.bytesHanded, into.blocked)
        into.playerBlocked = client.writableNeedDrain
        into.playerWritten = sendMark(client, down.bytesHanded, into.playerBlocked)
      }
    },
    timeouts,
    // Once a side has ended, the drain's own bound (LINGER_MS) decides: a timeout then would misname the end.
    (end) => {
      if (firstEnd === undefined) finish(end)
    }
  )
  // `on`, not `once`: each fires once anyway, and `once` adds a wrapper and its state per listener per player.
  client.on("end", onClientEnd)
  backend.on("end", onBackendEnd)
  client.on("error", onClientError).on("close", onClientClose)
  backend.on("error", onBackendError).on("close", onBackendClose)

  /**
   * While the backend has sent the player nothing, the player's connection is still in the login state with no
   * encryption or compression: a login Disconnect is understood. After that only a close is safe.
   */
  const end = (reason: string) => {
    if (done || endedBecause !== undefined) return
    endedBecause = reason
    if (firstEnd !== undefined || down.bytesRead > 0 || client.destroyed) return finish("ended")
    firstEnd = "ended"
    up.stop()
    down.discard()
    backend.destroy()
    client.end(encodeLoginDisconnect(reason))
    // The player closes on reading the message; the linger bounds a player that does not.
    clearTimeout(lingerTimer)
    lingerTimer = setTimeout(() => finish("ended"), LINGER_MS)
    lingerTimer.unref()
  }

  return {
    // Node counts what it read and what went through its writes; the relay's direct sends are counted by `down`.
    meter: { bytesIn: () => client.bytesRead, bytesOut: () => outBefore + down.bytesHanded },
    end
  }
}

export const rawMode: RelayMode = { name: "passthrough", kind: "raw", authenticates: false, start }
