/**
 * What every answer of the web server goes through, around the API's router: the rate limit (`X-RateLimit-*` on every
 * API answer, 429 past it), CORS for `cors_origins` only, the bound on request bodies, security headers, the web UI's
 * files, and one error shape, `{"error":{"code","message","details"?}}`, for whatever the router itself answers
 * (an unknown route, a request that does not match the contract, a failure of Portal's own).
 */
import * as HttpApiError from "@effect/platform/HttpApiError"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { API_PREFIX } from "./api.js"
import { isBodyTooLarge, MAX_BODY_BYTES } from "./limits.js"
import type { RateDecision, RateLimiter } from "./rateLimit.js"
import { type ErrorBody, errorBody } from "./schemas.js"
import type { UiFile } from "./ui.js"

/** The UI runs only its own files: no inline script or style, nothing from elsewhere, never inside a frame. */
export const UI_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
const API_CSP = "default-src 'none'; frame-ancestors 'none'"

const SECURITY_HEADERS = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin"
}

const CORS_ALLOWED_HEADERS = "authorization, content-type, last-event-id"
const CORS_EXPOSED_HEADERS = "retry-after, www-authenticate, x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset"
const CORS_METHODS = "GET, POST, PUT, DELETE, OPTIONS"

export interface EdgeOptions {
  readonly limiter: RateLimiter
  readonly corsOrigins: ReadonlyArray<string>
  /** The UI's files, when `enable_webui`. */
  readonly ui: ReadonlyMap<string, UiFile> | undefined
}

const jsonError = (status: number, body: ErrorBody, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson({ error: body }, { status, headers })

/** The 413 of a body over MAX_BODY_BYTES, however it was found out. */
const payloadTooLarge = (headers: Record<string, string> = {}) =>
  jsonError(413, errorBody("payload_too_large", `the request body is larger than ${MAX_BODY_BYTES} bytes`), headers)

const rateHeaders = (decision: RateDecision): Record<string, string> => ({
  "x-ratelimit-limit": String(decision.limit),
  "x-ratelimit-remaining": String(decision.remaining),
  "x-ratelimit-reset": String(decision.resetSeconds)
})

/** The contract's decode failures, as the platform encodes them: rewritten into the one error shape. */
const DecodeFailure = Schema.Struct({
  _tag: Schema.Literal("HttpApiDecodeError"),
  message: Schema.String,
  issues: Schema.Array(HttpApiError.Issue)
})
const decodeFailure = Schema.decodeUnknownOption(Schema.parseJson(DecodeFailure))

const asDecodeFailure = (response: HttpServerResponse.HttpServerResponse) => {
  if (response.status !== 400 || response.body._tag !== "Uint8Array") return Option.none()
  return decodeFailure(new TextDecoder().decode(response.body.body))
}

const describeIssues = (issues: ReadonlyArray<{ readonly path: ReadonlyArray<PropertyKey>; readonly message: string }>) =>
  issues.map((issue) => ({ path: issue.path.map(String).join("."), message: issue.message }))

/**
 * A request that does not match the contract, in one line: its first issue (where, and what), and how many more
 * `details.issues` lists. The decoder's own message is a multi-line tree, with types spelt in TypeScript.
 */
const contractFailure = (issues: ReadonlyArray<{ readonly path: ReadonlyArray<PropertyKey>; readonly message: string }>) => {
  const described = describeIssues(issues)
  const first = described[0]
  const summary = first === undefined ? "the request does not match the API" : `${first.path.length > 0 ? `${first.path}: ` : ""}${first.message.split("\n")[0]}`
  const more = described.length > 1 ? ` (and ${described.length - 1} more in details.issues)` : ""
  return jsonError(400, errorBody("bad_request", `${summary}${more}`, { issues: described }))
}

/** The routes whose body is JSON: anything else sent to them is refused by its type first. */
const JSON_ROUTES = [/^\/bans$/, /^\/players\/[^/]+\/kick$/]

/** What the router failed with, as an answer. */
const failureResponse = (request: HttpServerRequest.HttpServerRequest, cause: Cause.Cause<unknown>) => {
  const failure = Cause.squash(cause)
  if (failure instanceof HttpServerError.RouteNotFound || (Cause.isFailType(cause) && cause.error instanceof HttpServerError.RouteNotFound)) {
    return Effect.succeed(jsonError(404, errorBody("not_found", `no route ${request.method} ${new URL(request.url, "http://x").pathname}`)))
  }
  if (failure instanceof HttpApiError.HttpApiDecodeError) return Effect.succeed(contractFailure(failure.issues))
  if (failure instanceof HttpServerError.RequestError && isBodyTooLarge(failure)) {
    return Effect.succeed(payloadTooLarge())
  }
  if (failure instanceof HttpServerError.RequestError && failure.reason === "Decode") {
    return Effect.succeed(jsonError(400, errorBody("bad_request", "the body is not valid JSON")))
  }
  if (failure instanceof HttpServerError.RequestError) {
    return Effect.succeed(jsonError(400, errorBody("bad_request", `cannot read the request: ${failure.message}`)))
  }
  if (Cause.isInterruptedOnly(cause)) return Effect.succeed(jsonError(503, errorBody("shutting_down", "Portal is shutting down")))
  return Effect.as(
    Effect.logError(`admin API: ${request.method} ${request.url} failed`, cause),
    jsonError(500, errorBody("internal", "Portal failed to answer this request; the log has the details"))
  )
}

/**
 * A streamed body read whole, or undefined once it goes past MAX_BODY_BYTES: the rest is left unread (not destroyed),
 * and the answer's `connection: close` ends the connection once the 413 is out.
 */
const readBoundedBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.async<Buffer | undefined, Error>((resume) => {
    const message = NodeHttpServerRequest.toIncomingMessage(request)
    const chunks: Array<Buffer> = []
    let size = 0
    const stop = () => {
      message.off("data", onData)
      message.off("end", onEnd)
      message.off("error", onError)
      message.off("close", onClose)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= MAX_BODY_BYTES) return void chunks.push(chunk)
      stop()
      message.pause()
      resume(Effect.succeed(undefined))
    }
    const onEnd = () => {
      stop()
      resume(Effect.succeed(Buffer.concat(chunks)))
    }
    const onError = (error: Error) => {
      stop()
      resume(Effect.fail(error))
    }
    const onClose = () => onError(new Error("the connection closed before the body ended"))
    message.on("data", onData)
    message.once("end", onEnd)
    message.once("error", onError)
    message.once("close", onClose)
    return Effect.sync(stop)
  })

/** The request with its body already read: the router reads it from here. */
const withBody = (request: HttpServerRequest.HttpServerRequest, body: Buffer) => {
  const headers = new Headers()
  for (const [name, value] of Object.entries(request.headers)) {
    if (name !== "transfer-encoding" && name !== "connection" && name !== "keep-alive") headers.set(name, value)
  }
  const replaced = HttpServerRequest.fromWeb(new Request(`http://portal${request.url}`, { method: request.method, headers, body }))
  return Option.match(request.remoteAddress, { onNone: () => replaced, onSome: (remoteAddress) => replaced.modify({ remoteAddress }) })
}

export const makeEdge = (options: EdgeOptions) => {
  const allowedOrigins = new Set(options.corsOrigins)

  const corsHeaders = (request: HttpServerRequest.HttpServerRequest): Record<string, string> => {
    const origin = request.headers["origin"]
    return origin !== undefined && allowedOrigins.has(origin)
      ? { "access-control-allow-origin": origin, "access-control-expose-headers": CORS_EXPOSED_HEADERS, vary: "Origin" }
      : {}
  }

  /** A preflight: the CORS answer for an allowed origin, and nothing of CORS for any other. */
  const preflight = (request: HttpServerRequest.HttpServerRequest) => {
    const origin = request.headers["origin"]
    const headers: Record<string, string> =
      origin !== undefined && allowedOrigins.has(origin)
        ? {
            "access-control-allow-origin": origin,
            "access-control-allow-methods": CORS_METHODS,
            "access-control-allow-headers": CORS_ALLOWED_HEADERS,
            "access-control-max-age": "600",
            vary: "Origin"
          }
        : {}
    return HttpServerResponse.empty({ status: 204, headers })
  }

  const api = <E, R>(request: HttpServerRequest.HttpServerRequest, app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.gen(function* () {
      const address = Option.getOrElse(request.remoteAddress, () => "unknown")
      const decision = options.limiter(address, yield* Clock.currentTimeMillis)
      const finish = (response: HttpServerResponse.HttpServerResponse) =>
        HttpServerResponse.setHeaders(response, {
          ...SECURITY_HEADERS,
          "content-security-policy": API_CSP,
          "cache-control": "no-store",
          ...rateHeaders(decision),
          ...corsHeaders(request),
          ...(response.status === 401 ? { "www-authenticate": 'Bearer realm="portal"' } : {})
        })
      if (!decision.allowed) {
        yield* Effect.logDebug(`admin API: ${address} is over [web.rate_limit]`)
        return finish(
          jsonError(429, errorBody("rate_limited", `more than ${decision.limit} requests in a minute; try again in ${decision.resetSeconds} s`), {
            "retry-after": String(decision.resetSeconds)
          })
        )
      }
      if (request.method === "OPTIONS") return finish(preflight(request))
      const declared = Number(request.headers["content-length"] ?? "0")
      if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
        return finish(payloadTooLarge())
      }
      const pathname = new URL(request.url, "http://x").pathname.slice(API_PREFIX.length)
      const mediaType = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
      const hasBody = declared > 0 || request.headers["transfer-encoding"] !== undefined
      if (request.method === "POST" && hasBody && mediaType !== "" && mediaType !== "application/json" && JSON_ROUTES.some((route) => route.test(pathname))) {
        return finish(jsonError(415, errorBody("unsupported_media_type", `send the body as application/json, not ${mediaType}`)))
      }
      // A body without a declared length (chunked) is read here, within the bound: past it, the platform's reader
      // would destroy the connection instead of letting the 413 out.
      const streamed = hasBody && request.headers["content-length"] === undefined && request.method !== "GET" && request.method !== "HEAD"
      const bodied = streamed ? yield* Effect.either(readBoundedBody(request)) : undefined
      if (bodied?._tag === "Right" && bodied.right === undefined) {
        return finish(payloadTooLarge({ connection: "close" }))
      }
      if (bodied?._tag === "Left") return finish(jsonError(400, errorBody("bad_request", `cannot read the request: ${bodied.left.message}`)))
      const served = bodied === undefined ? app : Effect.provideService(app, HttpServerRequest.HttpServerRequest, withBody(request, bodied.right!))
      const answered = yield* served.pipe(
        HttpIncomingMessage.withMaxBodySize(Option.some(MAX_BODY_BYTES)),
        Effect.catchAllCause((cause) => failureResponse(request, cause))
      )
      const response = Option.match(asDecodeFailure(answered), { onNone: () => answered, onSome: (failure) => contractFailure(failure.issues) })
      if (request.method !== "GET") yield* Effect.logInfo(`admin API: ${request.method} ${request.url} from ${address}: ${response.status}`)
      else yield* Effect.logDebug(`admin API: ${request.method} ${request.url} from ${address}: ${response.status}`)
      return finish(response)
    })

  const ui = (request: HttpServerRequest.HttpServerRequest) => {
    const pathname = new URL(request.url, "http://x").pathname
    const file = options.ui?.get(pathname === "/index.html" ? "/" : pathname)
    const headers = { ...SECURITY_HEADERS, "content-security-policy": UI_CSP }
    if (file === undefined || (request.method !== "GET" && request.method !== "HEAD")) {
      return HttpServerResponse.text("Not found\n", { status: 404, headers })
    }
    if (request.headers["if-none-match"] === file.etag) {
      return HttpServerResponse.empty({ status: 304, headers: { ...headers, etag: file.etag } })
    }
    return HttpServerResponse.uint8Array(file.body, {
      contentType: file.contentType,
      headers: { ...headers, etag: file.etag, "cache-control": "no-cache" }
    })
  }

  return <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const pathname = new URL(request.url, "http://x").pathname
      return pathname === API_PREFIX || pathname.startsWith(`${API_PREFIX}/`) || pathname.startsWith("/api/")
        ? api(request, app)
        : Effect.succeed(ui(request))
    })
}
