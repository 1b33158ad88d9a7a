/**
 * How worker threads listen on `bind`. With the native addon the main thread makes the sockets: one listening
 * socket of its own, duplicated for each worker (`so_reuseport = false`: the kernel hands each connection to
 * whichever worker accepts first), or one socket per worker bound with SO_REUSEPORT (`so_reuseport = true`: the
 * kernel spreads connections evenly). Without the addon, a Node that has `reusePort` (22.12+) lets each worker bind
 * its own SO_REUSEPORT socket; otherwise worker threads cannot share the address, and the main thread runs the data
 * plane itself.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as dns from "node:dns"
import * as net from "node:net"
import type { HostPort } from "../../schema/HostPort.js"
import { formatHostPort } from "../../schema/HostPort.js"
import { ListenError } from "../listener/listen.js"
import { loadNativeAddon, type NativeAddon } from "../native/addon.js"

/** What a worker listens on. */
export type WorkerListen =
  /** A listening socket the main thread made for this worker (its own copy, or its own SO_REUSEPORT socket). */
  | { readonly _tag: "Fd"; readonly fd: number }
  /** Bind with Node's own `reusePort` (no addon). */
  | { readonly _tag: "ReusePort"; readonly host: string; readonly port: number }

export interface ListenPlan {
  /** The address the workers listen on (a port 0 in `bind` resolved). */
  readonly address: { readonly host: string; readonly port: number }
  /** How the workers share the address, as logged at start. */
  readonly description: string
  /** A note to log (and print in --check) when what was asked for could not be had. */
  readonly note: string | undefined
  /** The socket for the next worker (at start, and for a replacement). */
  readonly forWorker: () => Effect.Effect<WorkerListen, ListenError>
  /** Gives back what the main thread holds (its own socket). */
  readonly close: () => void
}

/** Why worker threads cannot be used here, when they cannot. */
export interface NoWorkers {
  readonly _tag: "NoWorkers"
  readonly reason: string
}

/** Whether Node's own `listen({ reusePort })` exists (22.12+ on the 22 line, 23.1+). */
export const nodeHasReusePort = (version = process.versions.node): boolean => {
  const [major = 0, minor = 0] = version.split(".").map(Number)
  return major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12)
}

/** Why worker threads cannot share a listening address here, or undefined when they can. */
export const workerThreadsUnsupported = (): string | undefined =>
  usableAddon() !== undefined || nodeHasReusePort()
    ? undefined
    : "worker threads need the native addon (not built here) or Node 22.12+ to share the listening address"

/** Whether a listening socket can be bound with SO_REUSEPORT here (a probe on 127.0.0.1), and why not. */
export const reusePortUnsupported = (): string | undefined => {
  const addon = usableAddon()
  if (addon === undefined) return nodeHasReusePort() ? undefined : "it needs the native addon (not built here) or Node 22.12+"
  try {
    addon.closeFd(addon.listenTcp("127.0.0.1", 0, 1, 1))
    return undefined
  } catch (error) {
    return `this system refuses it (${errorText(error)})`
  }
}

const usableAddon = (): NativeAddon | undefined => {
  const loaded = loadNativeAddon()
  return "addon" in loaded && typeof loaded.addon.listenTcp === "function" ? loaded.addon : undefined
}

const resolveHost = (host: string) =>
  net.isIP(host) !== 0
    ? Effect.succeed(host)
    : Effect.async<string, ListenError>((resume) => {
        dns.lookup(host, (error, address) =>
          resume(error ? Effect.fail(new ListenError({ address: host, reason: error.message })) : Effect.succeed(address))
        )
      })

/** What went wrong, for the log: the addon's messages are `call: CODE (what the system says)`, less the call. */
const errorText = (error: unknown): string => (error instanceof Error ? error.message.replace(/^[A-Za-z]+: /, "") : String(error))

const ADDRESS_IN_USE = "the address is already in use"

/** The plan for `bind`, or why there can be no worker threads here. */
export const planListening = (bind: HostPort, soReusePort: boolean) =>
  Effect.gen(function* () {
    const addon = usableAddon()
    const where = formatHostPort(bind)
    if (addon === undefined) {
      if (!nodeHasReusePort()) {
        return {
          _tag: "NoWorkers",
          reason: `worker threads need the native addon (not built here) or Node 22.12+ to share ${where}`
        } satisfies NoWorkers
      }
      const note = soReusePort ? undefined : "the shared listening socket needs the native addon; each worker binds its own with SO_REUSEPORT"
      return yield* nodeReusePlan(bind, note)
    }
    const host = yield* resolveHost(bind.host)
    const tryListen = (port: number, reusePort: boolean) =>
      Effect.try({
        try: () => addon.listenTcp(host, port, 511, reusePort ? 1 : 0),
        catch: (error) =>
          new ListenError({
            address: where,
            reason: (error as NodeJS.ErrnoException).code === "EADDRINUSE" ? ADDRESS_IN_USE : errorText(error)
          })
      })
    if (soReusePort) {
      // SO_REUSEPORT would let Portal share the port with whatever already listens there (another Portal, with another
      // configuration, silently taking half the players): a plain socket bound first finds it, and Portal refuses
      // to start, as it does on one thread.
      if (bind.port !== 0) addon.closeFd(yield* tryListen(bind.port, false))
      // PORTAL_TEST_NO_REUSEPORT=1 stands for a system that refuses SO_REUSEPORT (tests of the fallback).
      const first =
        process.env.PORTAL_TEST_NO_REUSEPORT === "1"
          ? Either.left(new ListenError({ address: where, reason: "SO_REUSEPORT refused (PORTAL_TEST_NO_REUSEPORT)" }))
          : yield* Effect.either(tryListen(bind.port, true))
      if (first._tag === "Right") {
        const port = addon.localPort(first.right)
        let spare: number | undefined = first.right
        const plan: ListenPlan = {
          address: { host: bind.host, port },
          description: `each worker listens on ${formatHostPort({ host: bind.host, port })} with its own socket (SO_REUSEPORT)`,
          note: undefined,
          // The first worker takes the socket made to learn the port; the others get new ones on the same port.
          forWorker: () =>
            spare !== undefined
              ? Effect.sync(() => {
                  const fd = spare!
                  spare = undefined
                  return { _tag: "Fd", fd } as const
                })
              : Effect.map(tryListen(port, true), (fd) => ({ _tag: "Fd", fd }) as const),
          close: () => {
            if (spare !== undefined) addon.closeFd(spare)
            spare = undefined
          }
        }
        return plan
      }
      // No SO_REUSEPORT here (or the address is taken): the shared socket, said once.
      const shared = yield* sharedPlan(addon, tryListen, bind)
      return { ...shared, note: `so_reuseport is not available here (${first.left.reason}); the workers share one listening socket` }
    }
    return yield* sharedPlan(addon, tryListen, bind)
  })

const sharedPlan = (addon: NativeAddon, tryListen: (port: number, reusePort: boolean) => Effect.Effect<number, ListenError>, bind: HostPort) =>
  Effect.map(tryListen(bind.port, false), (fd): ListenPlan => {
    const port = addon.localPort(fd)
    let open = true
    return {
      address: { host: bind.host, port },
      description: `the workers share one listening socket on ${formatHostPort({ host: bind.host, port })}`,
      note: undefined,
      forWorker: () =>
        Effect.try({
          try: () => ({ _tag: "Fd", fd: addon.dupFd(fd) }) as const,
          catch: (error) => new ListenError({ address: formatHostPort(bind), reason: errorText(error) })
        }),
      close: () => {
        if (open) addon.closeFd(fd)
        open = false
      }
    }
  })

/**
 * Without the addon: workers bind with Node's reusePort. A plain probe socket first fixes a port 0, and finds
 * whatever already listens on a given port (SO_REUSEPORT would share it silently).
 */
const nodeReusePlan = (bind: HostPort, note: string | undefined) =>
  Effect.gen(function* () {
    const port = yield* Effect.async<number, ListenError>((resume) => {
      const probe = net.createServer()
      probe.once("error", (error: NodeJS.ErrnoException) =>
        resume(Effect.fail(new ListenError({ address: formatHostPort(bind), reason: error.code === "EADDRINUSE" ? ADDRESS_IN_USE : error.message })))
      )
      probe.listen({ host: bind.host, port: bind.port }, () => {
        const { port: chosen } = probe.address() as net.AddressInfo
        probe.close(() => resume(Effect.succeed(chosen)))
      })
    })
    const plan: ListenPlan = {
      address: { host: bind.host, port },
      description: `each worker listens on ${formatHostPort({ host: bind.host, port })} with its own socket (SO_REUSEPORT)`,
      note,
      forWorker: () => Effect.succeed({ _tag: "ReusePort", host: bind.host, port }),
      close: () => {}
    }
    return plan
  })
