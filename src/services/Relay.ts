/**
 * Relay: the relayed sessions of this process. It starts a session in the relay mode its server's `proxy_mode`
 * calls for (relay/modes.ts), keeps the one watchdog that enforces the backend `read` and `write` timeouts, and ends
 * every session still running when Portal stops.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { ServerDefinition } from "../schema/decode.js"
import { type ModeChoice, relayModeFor } from "./relay/modes.js"
import type { LiveRelay, RelayMode, RelayOutcome, RelayStart } from "./relay/RelayMode.js"
import { emptyWaiters } from "./runtime/emptyWaiters.js"
import { RelayWatchdog } from "./relay/watchdog.js"

export type { ByteMeter, LiveRelay, RelayEnd, RelayMode, RelayOutcome, RelayStart } from "./relay/RelayMode.js"
export { relayTimeouts, type RelayTimeouts } from "./relay/watchdog.js"

/** An entry of the running relays: emptied when its relay ends (see the note above RelayWatchdog). */
interface Running {
  relay: LiveRelay | undefined
}

/** Said to players whose session Portal ends because it is stopping. */
export const SHUTDOWN_REASON = "The proxy is restarting. Please reconnect in a moment."

export interface RelayDataPlane {
  /** The relay mode for a server, with the reason when it falls back from the one configured. */
  readonly modeFor: (server: ServerDefinition) => ModeChoice
  /** Starts relaying in `mode` and returns at once; the session lives on its own and reports through `onEnd`. */
  readonly start: (mode: RelayMode, request: RelayStart) => LiveRelay
}

const NO_BYTES: LiveRelay["meter"] = { bytesIn: () => 0, bytesOut: () => 0 }

/** The relay of a session one of whose sockets was gone before it started: both closed, reported at once. */
const endedAtStart = ({ client, backend, onEnd }: RelayStart): LiveRelay => {
  const end = client.destroyed ? "client_closed" : "backend_closed"
  client.destroy()
  backend.destroy()
  onEnd({ end })
  return { meter: NO_BYTES, end: () => {} }
}

export class Relay extends Effect.Service<Relay>()("portal/Relay", {
  scoped: Effect.gen(function* () {
    const watchdog = new RelayWatchdog()
    const active = new Set<Running>()
    const idle = emptyWaiters(() => active.size === 0)

    // A suspended fiber per player would cost more memory than the player's sockets: a relay runs on callbacks.
    const start = (mode: RelayMode, request: RelayStart): LiveRelay => {
      // A side that closed while the login was replayed has already fired its events: no mode would see it end.
      if (request.client.destroyed || request.backend.destroyed) return endedAtStart(request)
      const running: Running = { relay: undefined }
      let ended = false
      const onEnd = (outcome: RelayOutcome) => {
        ended = true
        active.delete(running)
        running.relay = undefined
        idle.wakeIfEmpty()
        request.onEnd(outcome)
      }
      const relay = mode.start({ ...request, onEnd }, watchdog)
      // A relay that ended while starting has already reported; it must not linger in `active`.
      if (!ended) {
        running.relay = relay
        active.add(running)
      }
      return relay
    }

    /** Waits until no relay is running (or the effect is interrupted). */
    const awaitIdle = idle.wait

    /** Ends every relay with the shutdown reason, then gives them (and the splice addon's descriptors) a moment. */
    const endAll = Effect.gen(function* () {
      for (const running of [...active]) running.relay?.end(SHUTDOWN_REASON)
      yield* awaitIdle.pipe(Effect.interruptible, Effect.timeoutOption(Duration.seconds(2)))
    })

    // The listener ends what its grace left (while the services a session reports to still run); this is the net.
    yield* Effect.addFinalizer(() => endAll)

    const dataPlane: RelayDataPlane = { modeFor: relayModeFor, start }
    return {
      dataPlane,
      awaitIdle,
      endAll,
      /** Relayed sessions running now. */
      active: Effect.sync(() => active.size),
      watchdog
    }
  })
}) {}
