/**
 * The port between ServerManager and the things that really start and stop a backend server: a local process
 * (`local`), a hosting panel's API (`panel`) or a server controller's API (`controller`).
 *
 * A provider carries out commands (`start`, `stop`, `abort`) and reports what it sees as `Observation`s; the
 * lifecycle state itself is decided by the pure state machine in `stateMachine.ts`, never by a provider.
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { ServerManagerConfig } from "../../schema/ServerConfig.js"

/** Why a provider could not do what it was asked. */
export type ProviderErrorReason =
  /** The API refused the key (HTTP 401 or 403). */
  | "unauthorized"
  /** The API answered with another non-success status. */
  | "http_status"
  /** No answer: connection refused, DNS failure, or no answer within the request timeout. */
  | "unreachable"
  /** An answer that is not what the API documents. */
  | "bad_response"
  /** The local command could not be started (missing executable, missing working directory, ...). */
  | "spawn"

export class ProviderError extends Data.TaggedError("ProviderError")<{
  readonly reason: ProviderErrorReason
  readonly message: string
  readonly status?: number
}> {}

/** What a provider saw. `detail` becomes the reason of the transition it causes. */
export type Observation =
  /** Remote: the API says running. Local: the ready line was printed. */
  | { readonly _tag: "Running"; readonly detail: string }
  | { readonly _tag: "Starting"; readonly detail: string }
  | { readonly _tag: "Stopping"; readonly detail: string }
  /** Stopped; `requested` when Portal asked for the stop (local: the process exited after `stop`). */
  | { readonly _tag: "Stopped"; readonly requested: boolean; readonly detail: string }
  /**
   * Local: the process exited without being asked to (an event, `polled` false). Controller: the API flags the
   * server as crashed (`polled` true: an answer that may be the state from before a start request).
   */
  | { readonly _tag: "Crashed"; readonly detail: string; readonly polled: boolean }
  /** The provider cannot tell or cannot act: API unreachable, key refused, bad answer. */
  | { readonly _tag: "Failed"; readonly error: ProviderError }

export interface Provider {
  /** The provider's state when tracking begins (local: stopped; remote: the first poll). */
  readonly initial: Effect.Effect<Observation>
  /** Runs for as long as the server is tracked (remote: polls every `poll_interval`; local: nothing to do). */
  readonly watch: Effect.Effect<void>
  /** Asks the server to start. Returns once the request was accepted (local: the process is spawned). */
  readonly start: Effect.Effect<void, ProviderError>
  /** Asks the server to stop gracefully. Local: returns when the process has exited (killed after `shutdown_timeout`). */
  readonly stop: Effect.Effect<void, ProviderError>
  /** Ends a start that did not become ready in time (local: the process is killed; remote: nothing). */
  readonly abort: Effect.Effect<void>
}

export interface ProviderInput {
  readonly serverId: string
  readonly config: ServerManagerConfig
  /** Feeds an observation to the state machine. */
  readonly report: (observation: Observation) => Effect.Effect<void>
  /** Bound of one HTTP request of a remote provider. */
  readonly requestTimeout: Duration.Duration
}

/**
 * Builds the provider of one server. Everything it starts lives in the given scope; closing the scope stops it
 * (a local process is stopped gracefully, bounded by `shutdown_timeout`).
 */
export type MakeProvider = (input: ProviderInput) => Effect.Effect<Provider, never, Scope.Scope>

/** The default bound of one HTTP request to a panel or controller API. */
export const REQUEST_TIMEOUT = Duration.seconds(5)
