/**
 * TCP keepalive with all three parameters of Portal's `[keepalive]` configuration, and TCP_NODELAY. Node sets only the
 * idle time (`socket.setKeepAlive(true, ms)`); the probe interval and count need setsockopt(2), done by the
 * portal_splice addon on Linux. Without the addon, sockets keep the kernel's interval and count.
 */
import * as Duration from "effect/Duration"
import type { Server, Socket } from "node:net"
import { loadNativeAddon, type NativeAddon } from "./addon.js"
import type { GlobalConfig } from "../../schema/GlobalConfig.js"
import { tcpFdOf } from "./tcpHandle.js"

export interface KeepaliveParams {
  /** Idle time before the first probe. */
  readonly idleMs: number
  /** Time between unanswered probes. */
  readonly intervalMs: number
  /** Unanswered probes before the connection is dropped. */
  readonly count: number
}

/** `[keepalive]` as setsockopt(2) takes it. */
export const keepaliveParams = (global: GlobalConfig): KeepaliveParams => ({
  idleMs: Duration.toMillis(global.keepalive.time),
  intervalMs: Duration.toMillis(global.keepalive.interval),
  count: global.keepalive.retries
})

export type KeepaliveSupport = { readonly full: true } | { readonly full: false; readonly reason: string }

const usableAddon = (): { readonly addon: NativeAddon } | { readonly reason: string } => {
  const result = loadNativeAddon()
  if (!("addon" in result)) return result
  // An addon built by an older Portal loads but lacks the functions.
  if (typeof result.addon.setKeepAlive !== "function" || typeof result.addon.setNoDelay !== "function")
    return { reason: "the addon has no setKeepAlive or setNoDelay (built by an older version; run npm run install)" }
  return result
}

let support: KeepaliveSupport | undefined

/** Whether interval and count can be set; the reason when not. Computed once. */
export const keepaliveSupport = (): KeepaliveSupport =>
  (support ??= (() => {
    const result = usableAddon()
    return "addon" in result ? { full: true } : { full: false, reason: result.reason }
  })())

/** What setsockopt(2) accepts on Linux: TCP_KEEPIDLE and TCP_KEEPINTVL up to 32767 seconds, TCP_KEEPCNT up to 127. */
export const KEEPALIVE_MAX_SECONDS = 32767
export const KEEPALIVE_MAX_PROBES = 127

/**
 * The kernel counts in whole seconds; rounding down could turn a short setting into 0, which it rejects. A value
 * over its limit is set at the limit: refused, it would take the other two values down with it.
 */
const wholeSeconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000))
const seconds = (ms: number): number => Math.min(KEEPALIVE_MAX_SECONDS, wholeSeconds(ms))
const probes = (count: number): number => Math.max(1, Math.ceil(count))

/** Whether the kernel takes `params` as they are, rather than at its limits. */
export const keepaliveWithinLimits = (params: KeepaliveParams): boolean =>
  probes(params.count) <= KEEPALIVE_MAX_PROBES && wholeSeconds(params.idleMs) <= KEEPALIVE_MAX_SECONDS && wholeSeconds(params.intervalMs) <= KEEPALIVE_MAX_SECONDS

/** Keepalive on the fd with all three parameters, in the kernel's units; throws what the addon throws. */
const setKeepAlive = (addon: NativeAddon, fd: number, params: KeepaliveParams): void =>
  addon.setKeepAlive(fd, seconds(params.idleMs), seconds(params.intervalMs), Math.min(KEEPALIVE_MAX_PROBES, probes(params.count)))

/**
 * Turns keepalive on with all three parameters through the addon (SO_KEEPALIVE included), or, where it cannot,
 * with Node's idle time only. Returns "full" when the addon set them, "idle_only" when only Node's idle time applies
 * (no addon, no fd yet, setsockopt refused a value). Never throws. Call it on a connected socket: a connecting one
 * has no fd yet. Node's own call is skipped when the addon succeeds: it costs two more system calls per socket, and
 * newer libuv versions would overwrite the interval and count with theirs.
 */
export const applyKeepalive = (socket: Socket, params: KeepaliveParams): "full" | "idle_only" => {
  const found = usableAddon()
  const fd = tcpFdOf(socket)
  if ("addon" in found && fd !== undefined) {
    try {
      setKeepAlive(found.addon, fd, params)
      return "full"
    } catch {
      // fall through to Node's idle time
    }
  }
  socket.setKeepAlive(true, params.idleMs)
  return "idle_only"
}

/**
 * Sets keepalive, with all three parameters, and TCP_NODELAY on a listening server's socket. Linux copies them into
 * every socket it accepts from then on and arms the keepalive timer there, which saves five system calls per player.
 * Returns false, having set nothing or only part, where it cannot (no addon, not listening, a value the kernel
 * refuses): the caller then sets them on each accepted socket. Never throws.
 */
export const applyToListener = (server: Server, params: KeepaliveParams): boolean => {
  const found = usableAddon()
  const fd = (server as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd
  if (!("addon" in found) || process.platform !== "linux" || typeof fd !== "number" || fd < 0) return false
  try {
    setKeepAlive(found.addon, fd, params)
    found.addon.setNoDelay(fd)
    return true
  } catch {
    return false
  }
}
