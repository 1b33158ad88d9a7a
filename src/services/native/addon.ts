/**
 * The portal_splice addon (native/splice.cc, built at install by node-gyp): the zero_copy relay, the TCP keepalive
 * parameters Node cannot set, and AES-CFB8 with the CPU's AES instructions (native/cfb8.cc). Loaded once, on first
 * use; Linux only.
 */
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

export interface SpliceStats {
  /** Bytes relayed so far client -> backend. */
  readonly clientToBackend: number
  /** Bytes relayed so far backend -> client. */
  readonly backendToClient: number
  /** Date.now()-style ms timestamp of the last byte read from the client (the handoff time before any). */
  readonly lastClientReadMs: number
  /** Same for the backend. */
  readonly lastBackendReadMs: number
  /** Bytes read from the backend not yet written to the client (a growing value means the client stalls). */
  readonly pendingToClient: number
  /** Bytes read from the client not yet written to the backend. */
  readonly pendingToBackend: number
}

export interface SpliceResult extends SpliceStats {
  readonly reason: "client_closed" | "backend_closed" | "cancelled" | "error"
  /** Error code or message when the end was an error rather than an end of stream. */
  readonly error?: string
}

/** What native/splice.cc exports; session handles are opaque. */
export interface NativeAddon {
  /**
   * Starts relaying a session; onDone runs from the event loop once it has ended, never from inside a call. The fds
   * stay the caller's, who must not close either before onDone or a release().
   */
  start(clientFd: number, backendFd: number, onDone: (result: SpliceResult) => void): object
  stats(handle: object): SpliceStats
  /** stats() into a Float64Array of 6, in the order of `SpliceCounter`. */
  statsInto(handle: object, out: Float64Array): void
  /** One non-blocking send(2) of the first `length` bytes: how many the kernel took (0 when full), or -errno. */
  send(fd: number, bytes: Uint8Array, length: number): number
  /** Flushes what the destinations take now, then ends the session; onDone follows. */
  cancel(handle: object): void
  /** Lets go of both fds at once, dropping what the pipes hold, before the caller closes either; onDone follows. */
  release(handle: object): void
  /** SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL and TCP_KEEPCNT; throws an Error with the errno name as `code`. */
  setKeepAlive(fd: number, idleSeconds: number, intervalSeconds: number, count: number): void
  /** TCP_NODELAY on; throws an Error with the errno name as `code`. */
  setNoDelay(fd: number): void
  /** At most `count` malloc arenas from now on (glibc's M_ARENA_MAX); false where the C library has no such setting. */
  limitMallocArenas(count: number): boolean
  /** The bytes in a socket's send queue not yet acknowledged by the peer (SIOCOUTQ); -1 when the kernel says no. */
  unsentBytes(fd: number): number
  /** Diagnostics and tests only: a socket's TCP_NOTSENT_LOWAT in bytes (0 when it follows the system default). */
  getNotSentLowat(fd: number): number
  /** Diagnostics and tests only: the keepalive settings (seconds, probes) and TCP_NODELAY the kernel holds for a socket. */
  getKeepAliveDiagnostic(fd: number): { enabled: boolean; idle: number; interval: number; count: number; noDelay: boolean }
  /**
   * Diagnostics and tests only: the zero_copy relay's pipes, idle in its pool or lent to sessions with bytes in
   * flight, the pipe2() calls that failed (no fd left) since the process started, and the most idle pipes kept.
   */
  pipePoolDiagnostic(): { idle: number; busy: number; failures: number; maxIdle: number }
  /**
   * A listening TCP socket bound to a numeric address, an IPv6 one with its zone id if any (SO_REUSEADDR; SO_REUSEPORT
   * when `reusePort` is 1), owned by the caller: Node listens on it with listen({ fd }). Throws an Error with the errno
   * name as `code`.
   */
  listenTcp(address: string, port: number, backlog: number, reusePort: number): number
  /** A close-on-exec duplicate of an fd. */
  dupFd(fd: number): number
  /** Closes an fd no Node handle owns. */
  closeFd(fd: number): void
  /** Whether SO_REUSEPORT is set on a socket (tests and diagnostics). */
  getReusePort(fd: number): boolean
  /** The port a socket is bound to. */
  localPort(fd: number): number
  /**
   * Fills an AES-128-CFB8 state (192 bytes: round keys, then the shift register) from a 16-byte key and IV; false
   * where the CPU has no AES instructions (the other two calls then throw).
   */
  cfb8Init(state: Uint8Array, key: Uint8Array, iv: Uint8Array): boolean
  /** The next input.length bytes of the stream into output (which may be input); the state moves on. */
  cfb8Encrypt(state: Uint8Array, input: Uint8Array, output: Uint8Array): void
  /** The same for received bytes; output must not overlap input. */
  cfb8Decrypt(state: Uint8Array, input: Uint8Array, output: Uint8Array): void
  /** V8's memory-saving mode on or off for the calling thread's heap (native/heapMode.cc). */
  memorySaving(on: boolean): void
  /** A memory-reducing full collection of the calling thread's heap, now (native/heapMode.cc). */
  collectGarbage(): void
}

export type NativeAddonLoad = { readonly addon: NativeAddon } | { readonly reason: string }

/** The nearest directory upwards with a package.json: the same from src/ (tests) and from dist/ (built). */
const packageRoot = (): string | undefined => {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir
    if (dirname(dir) === dir) return undefined
  }
}

const load = (): NativeAddonLoad => {
  if (process.platform !== "linux") return { reason: `the addon is Linux only, this is ${process.platform}` }
  const root = packageRoot()
  if (root === undefined) return { reason: "cannot find the package directory" }
  const file = join(root, "build", "Release", "portal_splice.node")
  if (!existsSync(file)) return { reason: `the addon was not built (no ${file}; run npm run install)` }
  try {
    return { addon: createRequire(import.meta.url)(file) as NativeAddon }
  } catch (error) {
    return { reason: `the addon failed to load: ${error instanceof Error ? error.message : String(error)}` }
  }
}

let loaded: NativeAddonLoad | undefined

/** The addon, or why it cannot be used (not Linux, not built, load error). Computed once. */
export const loadNativeAddon = (): NativeAddonLoad => (loaded ??= load())

/** send(2) of the addon, where it loaded: bytes the kernel took, or -errno. */
export type DirectSend = (fd: number, bytes: Uint8Array, length: number) => number

let directSend: DirectSend | null | undefined

/** The addon's direct send, or undefined without the addon (the relays then write through Node). Looked up once. */
export const directSender = (): DirectSend | undefined => {
  if (directSend === undefined) {
    const loaded = loadNativeAddon()
    directSend = "addon" in loaded ? loaded.addon.send : null
  }
  return directSend ?? undefined
}

let unsentReader: ((fd: number) => number) | null | undefined

/**
 * The addon's SIOCOUTQ (bytes the peer has not acknowledged), or undefined without it, or with an addon built before
 * it had one. Looked up once.
 */
export const unsentBytesReader = (): ((fd: number) => number) | undefined => {
  if (unsentReader === undefined) {
    const loaded = loadNativeAddon()
    unsentReader = "addon" in loaded && typeof loaded.addon.unsentBytes === "function" ? loaded.addon.unsentBytes : null
  }
  return unsentReader ?? undefined
}

/**
 * Caps the C library's malloc arenas, where the addon and glibc allow it (before threads are started: the arenas of
 * threads that already allocated stay); says whether it did.
 */
export const limitMallocArenas = (count: number): boolean => {
  const loaded = loadNativeAddon()
  return "addon" in loaded && typeof loaded.addon.limitMallocArenas === "function" && loaded.addon.limitMallocArenas(count)
}

/** The addon's switch for V8's memory-saving mode on the calling thread, or undefined without it. */
export const memorySavingSwitch = (): ((on: boolean) => void) | undefined => {
  const loaded = loadNativeAddon()
  return "addon" in loaded && typeof loaded.addon.memorySaving === "function" ? loaded.addon.memorySaving : undefined
}

/** The addon's memory-reducing collection of the calling thread's heap, or undefined without it. */
export const heapCollector = (): (() => void) | undefined => {
  const loaded = loadNativeAddon()
  return "addon" in loaded && typeof loaded.addon.collectGarbage === "function" ? loaded.addon.collectGarbage : undefined
}
