/**
 * The lifecycle state machine of a managed server, as pure functions: given the current status and an event,
 * the next status (or `undefined` when the event changes nothing). ServerManager applies it under a lock,
 * logs and publishes every change of state, and carries out the commands.
 *
 * `unreachable` is decided by health checks elsewhere and is never produced here.
 */
import type { ServerState } from "../../schema/common.js"
import type { Observation, ProviderError } from "./Provider.js"

export interface Status {
  readonly state: ServerState
  /** Why the server is in this state, in words for operators. */
  readonly reason: string
  /** Epoch milliseconds of the last change of state. */
  readonly since: number
  /** The command Portal sent last and still waits to see carried out. */
  readonly pending: "start" | "stop" | undefined
  /** During a start Portal asked for: the provider has reported `starting` (or more) at least once. */
  readonly progressed: boolean
}

export type Event =
  /** A player wants to join (or a stop finished and a join was waiting). */
  | { readonly _tag: "StartRequested"; readonly reason: string }
  /** The start command failed (spawn failure: crashed; API failure: offline). */
  | { readonly _tag: "StartFailed"; readonly error: ProviderError }
  /**
   * `start_timeout` passed without the server becoming ready. `providerGoesOn`: the provider carries on with the
   * start (a panel's or a controller's; a local process is killed).
   */
  | { readonly _tag: "StartTimedOut"; readonly reason: string; readonly providerGoesOn: boolean }
  /** Idle shutdown. */
  | { readonly _tag: "StopRequested"; readonly reason: string }
  /** The stop command failed. */
  | { readonly _tag: "StopFailed"; readonly error: ProviderError }
  /** The provider never confirmed a stop Portal asked for. */
  | { readonly _tag: "StopTimedOut"; readonly reason: string }
  | { readonly _tag: "Observed"; readonly observation: Observation }

/** The fields of the next status; `since` is set by the caller when the state changes. */
export type Next = Omit<Status, "since">

/** The state a server starts in when tracking begins, from the provider's first observation. */
export const initialStatus = (observation: Observation, now: number): Status => {
  const base = { since: now, pending: undefined, progressed: false }
  switch (observation._tag) {
    case "Running":
      return { ...base, state: "online", reason: observation.detail }
    case "Starting":
      return { ...base, state: "starting", reason: observation.detail }
    case "Stopping":
      return { ...base, state: "stopping", reason: observation.detail }
    case "Stopped":
      return { ...base, state: "sleeping", reason: observation.detail }
    case "Crashed":
      return { ...base, state: "crashed", reason: observation.detail }
    case "Failed":
      return { ...base, state: "offline", reason: observation.error.message }
  }
}

const to = (state: ServerState, reason: string, pending: Status["pending"] = undefined, progressed = false): Next => ({
  state,
  reason,
  pending,
  progressed
})

/** Crashed by start_timeout while the provider goes on with that start (see StartTimedOut). */
export const stillStarting = (status: Pick<Status, "state" | "pending">): boolean => status.state === "crashed" && status.pending === "start"

/** Errors that mean the provider cannot be used at all right now: the server is `offline`. */
const isOfflineError = (error: ProviderError) => error.reason !== "spawn"

export const step = (status: Status, event: Event): Next | undefined => {
  const { state } = status
  switch (event._tag) {
    case "StartRequested":
      // After a start that timed out and that the provider goes on with, what it showed of that start still counts.
      return state === "sleeping" || state === "crashed" ? to("starting", event.reason, "start", stillStarting(status) && status.progressed) : undefined
    case "StartFailed":
      if (state !== "starting") return undefined
      return isOfflineError(event.error)
        ? to("offline", `start failed: ${event.error.message}`)
        : to("crashed", event.error.message)
    case "StartTimedOut":
      // Where the provider goes on with it, the start stays pending: a panel answering "starting" for it is no news.
      if (state !== "starting") return undefined
      return to("crashed", event.reason, event.providerGoesOn ? status.pending : undefined, status.progressed)
    case "StopRequested":
      return state === "online" || state === "starting" ? to("stopping", event.reason, "stop") : undefined
    case "StopFailed":
      if (state !== "stopping") return undefined
      return event.error.reason === "unauthorized" || event.error.reason === "unreachable"
        ? to("offline", `stop failed: ${event.error.message}`)
        : to("online", `stop failed: ${event.error.message}`)
    case "StopTimedOut":
      return state === "stopping" && status.pending === "stop" ? to("online", event.reason) : undefined
    case "Observed":
      return observe(status, event.observation)
  }
}

const observe = (status: Status, observation: Observation): Next | undefined => {
  const { state } = status
  // After a stop request the provider may report the old state for a poll or two: that is not news.
  const stopPending = state === "stopping" && status.pending === "stop"
  switch (observation._tag) {
    case "Running":
      if (state === "online" || stopPending) return undefined
      return to("online", observation.detail)
    case "Starting":
      if (stopPending) return undefined
      // The start that timed out, still under way on the provider's side: the verdict stands until it is running.
      if (stillStarting(status)) return undefined
      if (state === "starting") return status.progressed ? undefined : { ...status, progressed: true }
      return to("starting", observation.detail, undefined, true)
    case "Stopping":
      if (state === "stopping") return undefined
      return to("stopping", observation.detail, status.pending === "stop" ? "stop" : undefined)
    case "Stopped":
      // Once the provider showed the start, "stopped" ends it; before, it is the state from before the request.
      if (stillStarting(status)) return status.progressed ? { ...status, pending: undefined } : undefined
      if (state === "sleeping" || state === "crashed") return undefined
      if (state === "starting" && !observation.requested) {
        // Before the provider has shown any progress, "stopped" is the state from before the start request.
        if (status.pending === "start" && !status.progressed) return undefined
        return to("crashed", `stopped while starting (${observation.detail})`)
      }
      return to("sleeping", observation.detail)
    case "Crashed":
      if (stillStarting(status)) return observation.polled && !status.progressed ? undefined : { ...status, pending: undefined }
      if (state === "crashed") return undefined
      // As "stopped" above: a polled "crashed" before any progress is the state the start request is meant to end.
      if (observation.polled && state === "starting" && status.pending === "start" && !status.progressed) return undefined
      return to("crashed", observation.detail)
    case "Failed":
      if (state === "offline" && status.reason === observation.error.message) return undefined
      // One poll that fails while a start Portal asked for is under way (a 500, a timeout, a garbled answer) does not
      // end the start: players keep waiting, bounded by start_timeout. A refused key is not passing, and ends it.
      if (state === "starting" && status.pending === "start" && observation.error.reason !== "unauthorized") return undefined
      return to("offline", observation.error.message)
  }
}
