/**
 * A memory-reducing garbage collection of this thread's heap, once Portal has started (main thread, and each worker
 * thread once it listens).
 *
 * Why: loading and wiring Portal allocates a lot that survives, so V8 grows each thread's young generation during
 * startup (to 8 MiB semi-spaces on the main thread, 4 MiB on a worker) and leaves it that size, and the old
 * generation holds what startup promoted and dropped. V8 shrinks both only in a collection that reduces memory,
 * which it starts on its own after some idle time, or never. The young generation grows back under load as V8
 * sees fit (capping it instead cost 5 to 20% more CPU per login: docs/benchmarks.md, "Startup memory").
 *
 * How: the inspector protocol's HeapProfiler.collectGarbage, over an in-process session (no port is opened), is a
 * low-memory collection: one full collection that compacts the old generation and shrinks the young one to its
 * initial size. Where Node is built without the inspector, nothing happens.
 */
import * as Effect from "effect/Effect"

export const shrinkHeap: Effect.Effect<void> = Effect.promise(() => import("node:inspector")).pipe(
  Effect.flatMap((inspector) =>
    Effect.async<void>((resume) => {
      const session = new inspector.Session()
      session.connect()
      // The answer comes while the profiler agent holds its lock; disconnecting from inside it would wait for that
      // same lock forever, so the session is let go on the next turn of the event loop.
      session.post("HeapProfiler.collectGarbage", () => {
        setImmediate(() => session.disconnect())
        resume(Effect.void)
      })
    })
  ),
  Effect.catchAllCause(() => Effect.void)
)
