const { Effect, Fiber } = require("effect")
const prog = Effect.gen(function* () {
  const f = yield* Effect.uninterruptible(Effect.fork(Effect.never))
  const g = yield* Effect.uninterruptible(Effect.fork(Effect.interruptible(Effect.never)))
  const r = yield* Effect.race(Fiber.interrupt(g).pipe(Effect.as("g interrupted")), Effect.sleep("200 millis").pipe(Effect.as("g hung")))
  const s = yield* Effect.race(Fiber.interrupt(f).pipe(Effect.as("f interrupted")), Effect.sleep("200 millis").pipe(Effect.as("f hung")))
  console.log(r, s)
})
Effect.runPromise(prog)
