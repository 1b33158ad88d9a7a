/** Bounds on what a client may send the admin API. */
import type * as HttpServerError from "@effect/platform/HttpServerError"

/** Request bodies above this are refused (413): a server file or `proxy.toml` is a few kilobytes. */
export const MAX_BODY_BYTES = 256 * 1024

/** Whether reading a body failed because it went past the bound (the platform reports it this way). */
export const isBodyTooLarge = (error: HttpServerError.RequestError): boolean =>
  error.cause instanceof Error && error.cause.message === "maxBytes exceeded"
