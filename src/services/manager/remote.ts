/**
 * What the `panel` and `controller` providers share: typed HTTP calls with a bounded time, polling of the
 * server state every `poll_interval`, and log lines that say plainly when the API refuses the key or cannot be
 * reached (once per distinct problem, not once per poll).
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { ServerManagerConfig } from "../../schema/ServerConfig.js"
import { describeTransport } from "../net/transportError.js"
import { describeParseError } from "../parseIssue.js"
import { type Observation, type Provider, ProviderError, type ProviderInput } from "./Provider.js"

export type RemoteConfig = Extract<ServerManagerConfig, { readonly type: "panel" | "controller" }>

export interface RemoteApi<A, I> {
  /** How the API is named in messages ("panel", "controller"). */
  readonly name: string
  readonly start: HttpClientRequest.HttpClientRequest
  readonly stop: HttpClientRequest.HttpClientRequest
  readonly state: HttpClientRequest.HttpClientRequest
  /**
   * What an answer to `state` must be, as a Schema of its JSON: only the fields Portal reads are checked, the rest
   * of the answer is ignored.
   */
  readonly stateAnswer: Schema.Schema<A, I>
  /** The observation a decoded answer to `state` means. */
  readonly observe: (answer: A) => Observation
  /** Added to the message when the key is refused. */
  readonly keyHint: string
}

/** `api_url` without trailing slashes, so paths can be appended. */
export const apiBase = (config: RemoteConfig) => config.api_url.replace(/\/+$/, "")

const BODY_SNIPPET = 200

const parseJson = Schema.decodeEither(Schema.parseJson())

const pathOf = (request: HttpClientRequest.HttpClientRequest) => {
  try {
    return new URL(request.url).pathname
  } catch {
    return request.url
  }
}

export const makeRemote = <A, I>(
  input: ProviderInput,
  config: RemoteConfig,
  api: RemoteApi<A, I>
): Effect.Effect<Provider, never, Scope.Scope | HttpClient.HttpClient> =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const origin = apiBase(config)
    const annotate = Effect.annotateLogs("server", input.serverId)

    /** One request; every failure becomes a `ProviderError` naming the reason. */
    const call = (request: HttpClientRequest.HttpClientRequest): Effect.Effect<string, ProviderError> => {
      const what = `${request.method} ${pathOf(request)}`
      // Interruptible, so the time bound holds even when called from an uninterruptible region.
      return Effect.interruptible(client.execute(request)).pipe(
        Effect.flatMap((response) =>
          Effect.flatMap(Effect.orElseSucceed(response.text, () => ""), (text): Effect.Effect<string, ProviderError> => {
            const status = response.status
            if (status === 401 || status === 403) {
              return Effect.fail(
                new ProviderError({
                  reason: "unauthorized",
                  status,
                  message: `the ${api.name} API refused the API key (HTTP ${status} to ${what}); check server_manager.api_key${api.keyHint}`
                })
              )
            }
            if (status < 200 || status >= 300) {
              const snippet = text.trim().slice(0, BODY_SNIPPET)
              return Effect.fail(
                new ProviderError({
                  reason: "http_status",
                  status,
                  message: `the ${api.name} API answered HTTP ${status} to ${what}${snippet.length > 0 ? `: ${snippet}` : ""}`
                })
              )
            }
            return Effect.succeed(text)
          })
        ),
        Effect.interruptible,
        Effect.timeoutFail({
          duration: input.requestTimeout,
          onTimeout: () =>
            new ProviderError({
              reason: "unreachable",
              message: `the ${api.name} API at ${origin} did not answer ${what} within ${Duration.format(input.requestTimeout)}`
            })
        }),
        Effect.catchTags({
          RequestError: (error) =>
            Effect.fail(
              new ProviderError({
                reason: "unreachable",
                message: `cannot reach the ${api.name} API at ${origin} (${describeTransport(error)})`
              })
            ),
          ResponseError: (error) =>
            Effect.fail(new ProviderError({ reason: "bad_response", message: `unreadable answer from the ${api.name} API: ${error.message}` }))
        })
      )
    }

    const decodeState = Schema.decodeUnknownEither(api.stateAnswer)
    /** The observation an answer means, or a `bad_response` error saying what is wrong with it. */
    const observe = (text: string): Either.Either<Observation, ProviderError> => {
      const badResponse = (message: string) => new ProviderError({ reason: "bad_response", message })
      return Either.match(parseJson(text), {
        onLeft: () => Either.left(badResponse(`the ${api.name} API answered ${pathOf(api.state)} with something that is not JSON`)),
        onRight: (json) =>
          Either.match(decodeState(json), {
            onLeft: (error) => Either.left(badResponse(`unexpected answer from the ${api.name} API: ${describeParseError(error)}`)),
            onRight: (answer) => Either.right(api.observe(answer))
          })
      })
    }

    const poll: Effect.Effect<Observation> = call(api.state).pipe(
      Effect.flatMap((text) => observe(text)),
      Effect.catchAll((error) => Effect.succeed<Observation>({ _tag: "Failed", error }))
    )

    // The problem reported last, so that a problem that lasts is logged once, not on every poll.
    let lastProblem: string | undefined
    const pollLogged = Effect.tap(poll, (observation) => {
      if (observation._tag === "Failed") {
        const message = observation.error.message
        const again = message === lastProblem
        lastProblem = message
        return again
          ? Effect.logDebug(`still failing: ${message}`)
          : Effect.logWarning(`${message}; Portal keeps trying every ${Duration.format(config.poll_interval)}`)
      }
      if (lastProblem === undefined) return Effect.void
      lastProblem = undefined
      return Effect.logInfo(`the ${api.name} API answers again`)
    })

    const command = (request: HttpClientRequest.HttpClientRequest, label: string) =>
      call(request).pipe(
        Effect.tap(() => Effect.logInfo(`asked the ${api.name} to ${label} the server`)),
        Effect.tapError((error) => Effect.logWarning(`cannot ${label} the server: ${error.message}`)),
        Effect.asVoid,
        annotate
      )

    const provider: Provider = {
      initial: annotate(pollLogged),
      watch: Effect.forever(
        Effect.sleep(config.poll_interval).pipe(Effect.zipRight(pollLogged), Effect.flatMap(input.report))
      ).pipe(annotate),
      start: command(api.start, "start"),
      stop: command(api.stop, "stop"),
      abort: Effect.void
    }
    return provider
  })

/** Headers every request of a remote provider carries. */
export const withKey = (config: RemoteConfig) => (request: HttpClientRequest.HttpClientRequest) =>
  request.pipe(HttpClientRequest.bearerToken(config.api_key), HttpClientRequest.acceptJson)
