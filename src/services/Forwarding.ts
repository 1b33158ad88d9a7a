/**
 * Forwarding: what the backend is told about the player. In the raw modes that is the handshake: its address
 * (domain_rewrite, BungeeCord `legacy` / BungeeGuard `legacy_guard` payloads) and its port. In the packet modes the
 * handshake is built the same way (with the authenticated profile's UUID and properties in client_only), and
 * `modern` (Velocity) forwarding is answered by the packet relay with the secret read here (`modernSecret`).
 */
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type { ServerDefinition } from "../schema/decode.js"
import type { GlobalConfig } from "../schema/GlobalConfig.js"
import type { ForwardingMode } from "../schema/common.js"
import type { BackendAddress } from "../schema/ServerConfig.js"
import { bungeeGuardProperty, forgeProperties, type GameProfileProperty, legacyForwardingAddress, offlineUuid } from "../protocol/forwarding.js"
import { encodeHandshake, type Handshake, NEXT_STATE_LOGIN, NEXT_STATE_TRANSFER, splitAddress } from "../protocol/handshake.js"
import type { LoginStart } from "../protocol/login.js"
import { SecretReader } from "./forwarding/secretReader.js"

export class ForwardingUnavailable extends Data.TaggedError("ForwardingUnavailable")<{ readonly reason: string }> {
  override get message() {
    return this.reason
  }
}

const SECRET_CACHE_MS = 5_000

export const forwardingModeOf = (server: ServerDefinition, global: GlobalConfig): ForwardingMode =>
  server.config.forwarding_mode ?? global.forwarding.mode

export interface BackendHandshakeInput {
  readonly server: ServerDefinition
  readonly global: GlobalConfig
  readonly handshake: Handshake
  /**
   * The handshake frame as the client sent it, if at hand: sent unchanged when nothing in it changes (no rewrite, no
   * forwarding, not a transfer), which also keeps it byte for byte.
   */
  readonly raw?: Buffer
  readonly backend: BackendAddress
  readonly clientIp: string
  /** Present for logins; status pings carry no player. */
  readonly login: LoginStart | undefined
  /**
   * A packet mode's player as the backend must know it (the authenticated profile in client_only): its UUID and
   * properties go into legacy forwarding instead of Login Start's UUID. Its presence also lets `modern` through,
   * since the packet relay answers the backend's forwarding request.
   */
  readonly profile?: { readonly uuid: string; readonly properties: ReadonlyArray<GameProfileProperty> } | undefined
}

/** The host and port the backend sees, per `domain_rewrite` (the port follows the host's choice). */
export const rewrittenTarget = (input: BackendHandshakeInput): { readonly host: string; readonly port: number } => {
  const rewrite = input.server.config.domain_rewrite
  const { rawHost } = splitAddress(input.handshake.address)
  if (rewrite === "none") return { host: rawHost, port: input.handshake.port }
  if (rewrite === "from_backend") return { host: input.backend.host, port: input.backend.port }
  return { host: rewrite.explicit, port: input.backend.port }
}

/** The framed handshake for the backend in a raw forwarding mode; `secret` is legacy_guard's. */
const encodeBackendHandshake = (
  input: BackendHandshakeInput,
  mode: "none" | "legacy" | "legacy_guard",
  secret: string | undefined
): Buffer => {
  const unchanged =
    mode === "none" && input.server.config.domain_rewrite === "none" && input.handshake.nextState !== NEXT_STATE_TRANSFER
  // A frame of 254 bytes starts with FE, which careless backends take for a legacy ping: re-encoding writes FE 81 00.
  if (unchanged && input.raw !== undefined && input.raw[0] !== 0xfe) return input.raw
  const { suffix } = splitAddress(input.handshake.address)
  const target = rewrittenTarget(input)
  const nextState = input.handshake.nextState === NEXT_STATE_TRANSFER ? NEXT_STATE_LOGIN : input.handshake.nextState
  let address: string
  if (mode === "none") address = target.host + suffix
  else {
    const login = input.login!
    const profile = input.profile
    // Markers are dropped (backends split this address on NUL and expect three or four fields); a Forge client's
    // is told in properties instead.
    const properties = [...(profile?.properties ?? []), ...forgeProperties(suffix, "legacy")]
    address = legacyForwardingAddress({
      // The host without an SRV target's trailing dot, as BungeeCord and Velocity forward it: backends read it as
      // the player's virtual host (Paper's getHostname), and plugins compare it with their domains.
      host: target.host.replace(/\.$/, ""),
      clientIp: input.clientIp,
      uuid: profile?.uuid ?? login.uuid ?? offlineUuid(login.name),
      properties: mode === "legacy_guard" && secret !== undefined ? [...properties, bungeeGuardProperty(secret)] : properties
    })
  }
  return encodeHandshake({ protocolVersion: input.handshake.protocolVersion, address, port: target.port, nextState })
}

export class Forwarding extends Effect.Service<Forwarding>()("portal/Forwarding", {
  effect: Effect.gen(function* () {
    const reader = yield* SecretReader
    // Read at most every few seconds, so a rotated secret is picked up without a file read per login.
    const secrets = new Map<string, { readonly secret: string; readonly readAt: number }>()
    const secretOf = (file: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const cached = secrets.get(file)
        if (cached !== undefined && now - cached.readAt < SECRET_CACHE_MS) return Effect.succeed(cached.secret)
        return reader.read(file).pipe(
          Effect.map((text) => text.trim()),
          Effect.filterOrFail(
            (secret) => secret.length > 0,
            () => new ForwardingUnavailable({ reason: `the forwarding secret ${file} is empty` })
          ),
          Effect.tap((secret) => Effect.sync(() => secrets.set(file, { secret, readAt: now }))),
          Effect.catchTag("SecretUnreadable", (error) =>
            Effect.fail(new ForwardingUnavailable({ reason: `cannot read the forwarding secret ${file}: ${error.reason}` }))
          )
        )
      })

    /**
     * The handshake sent to the backend, framed. Transfers (next state 3) become ordinary logins: the backend
     * is reached from Portal, not by a transfer packet of its own.
     */
    const backendHandshake = (input: BackendHandshakeInput): Effect.Effect<Buffer, ForwardingUnavailable> => {
      const mode = input.login === undefined ? "none" : forwardingModeOf(input.server, input.global)
      switch (mode) {
        case "none":
        case "legacy":
          // Built at once: no secret to read, and this runs for every login.
          return Effect.succeed(encodeBackendHandshake(input, mode, undefined))
        case "legacy_guard":
          return Effect.map(secretOf(input.global.forwarding.secret_file), (secret) =>
            encodeBackendHandshake(input, mode, secret)
          )
        case "modern":
          // The packet relay answers the backend's request; the handshake itself carries nothing.
          if (input.profile !== undefined) return Effect.succeed(encodeBackendHandshake(input, "none", undefined))
          return Effect.fail(
            new ForwardingUnavailable({
              reason: "modern (Velocity) forwarding needs a packet proxy mode, which this server does not use"
            })
          )
      }
    }

    /** The secret of modern forwarding (the secret file's text, trimmed), for the packet relay's HMAC. */
    const modernSecret = (global: GlobalConfig): Effect.Effect<string, ForwardingUnavailable> => secretOf(global.forwarding.secret_file)

    return { backendHandshake, modernSecret, clearSecrets: Effect.sync(() => secrets.clear()) }
  }),
  dependencies: [SecretReader.layer]
}) {}
