/** HealthMonitor's probe loop over real sockets, with a Balancer that misbehaves: a bug in one round is logged, not fatal. */
import { it } from "@effect/vitest"
import { Effect, Either, Layer, Logger, Schema } from "effect"
import * as path from "node:path"
import { describe, expect } from "vitest"
import { decodeServerText } from "../../src/schema/decode.js"
import { GlobalConfig } from "../../src/schema/GlobalConfig.js"
import { Balancer } from "../../src/services/Balancer.js"
import { ConfigStore } from "../../src/services/ConfigStore.js"
import { HealthMonitor } from "../../src/services/HealthMonitor.js"
import { freePort } from "../helpers/net.js"
import { makeConfigDir } from "../helpers/tempdir.js"
import { waitFor } from "../helpers/wait.js"

describe("HealthMonitor", () => {
  it.live("a defect in one round is logged and the loop goes on probing", () =>
    Effect.gen(function* () {
      // A closed port: every tcp probe fails at once with ECONNREFUSED.
      const port = yield* Effect.promise(() => freePort())
      const server = Either.getOrThrow(decodeServerText("s.toml", "s.toml", `domains = ["s.example.com"]\naddresses = ["127.0.0.1:${port}"]`))
      const global = Schema.decodeUnknownSync(GlobalConfig)({
        active_health: { enabled: true, kind: "tcp", interval: "50ms", unhealthy_interval: "50ms", timeout: "300ms" }
      })
      const config = ConfigStore.layerStatic({
        configFile: path.join(makeConfigDir().root, "proxy.toml"),
        global,
        servers: new Map([[server.id, server]]),
        revision: 1
      })
      const verdicts: Array<boolean> = []
      const balancer = Layer.effect(
        Balancer,
        Effect.map(Balancer, (real) =>
          Balancer.make({
            ...real,
            setHealth: (definition, address, healthy) =>
              verdicts.push(healthy) === 1 ? Effect.die(new Error("a bug in the balancer")) : real.setHealth(definition, address, healthy)
          })
        )
      ).pipe(Layer.provide(Balancer.Default))
      const lines: Array<string> = []
      const logger = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ message }) => lines.push(Array.isArray(message) ? message.join(" ") : String(message)))
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          yield* HealthMonitor
          const real = yield* Balancer
          yield* Effect.promise(() => waitFor(() => verdicts.length >= 3, { what: "three rounds" }))
          // The round after the defect set the verdict the first could not.
          expect((yield* real.status(server)).map((address) => address.healthy)).toEqual([false])
        }).pipe(Effect.provide(HealthMonitor.Default.pipe(Layer.provideMerge(balancer), Layer.provide(config))))
      ).pipe(Effect.provide(logger))
      expect(lines.filter((line) => line.includes(`health: the probe loop of s 127.0.0.1:${port} failed unexpectedly`))).toHaveLength(1)
      expect(lines.filter((line) => line.includes("is down (ECONNREFUSED)"))).toHaveLength(1)
    })
  )
})
