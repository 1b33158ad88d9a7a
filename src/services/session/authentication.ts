/**
 * The authentication phase (client_only): between admission and join, Portal is the online-mode server towards the
 * player. It sends Encryption Request (RSA-1024 key made once per process, on the first such login; a fresh verify
 * token; `shouldAuthenticate` on 1.20.5+), reads Encryption Response, decrypts the shared secret (constant-time
 * PKCS#1 unpadding, protocol/loginCrypto.ts), checks the verify token (or its signed form on 1.19-1.19.2), turns on
 * AES-CFB8 both ways, and asks the session service whether the player joined with the server hash (`hasJoined`:
 * Mojang's by default, `PORTAL_SESSION_SERVER` points elsewhere; a bounded wait). Bans by the authenticated UUID
 * and name are checked here, since Login Start may have lied. The registry entry is renamed to the
 * authenticated player.
 *
 * Every refusal after the encryption started is an encrypted login Disconnect. The answer's decoder (Schema) is
 * loaded with a dynamic import on the first client_only login; the HTTP call goes over Portal's own kept-alive
 * HTTP/1.1 connections (session/sessionHttp.ts says why not Node's http or fetch), bounded by a timer that closes it.
 */
import type * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { timingSafeEqual } from "node:crypto"
import type { Socket } from "node:net"
import type { StreamCipher } from "../../protocol/cipher.js"
import { readFrame } from "../../protocol/frame.js"
import { encodeFrame } from "../../protocol/framing.js"
import {
  decodeEncryptionResponseBody,
  encodeEncryptionRequestBody,
  encodeLoginDisconnectBody,
  type EncryptionResponse
} from "../../protocol/loginPackets.js"
import {
  decryptSharedSecret,
  generateServerKeyPair,
  newVerifyToken,
  rsaDecrypt,
  serverHash,
  type ServerKeyPair,
  verifySignedVerifyToken
} from "../../protocol/loginCrypto.js"
import { packetIdsFor } from "../../protocol/packetIds.js"
import { parseUuid } from "../../protocol/uuid.js"
import { banMessage } from "../bans/message.js"
import type { BanDataPlane } from "../BanStore.js"
import { nameClaimKey, type PlayerRegistryDataPlane, releasingAlso } from "../PlayerRegistry.js"
import type { StatsDataPlane } from "../Stats.js"
import { createDecryptor, createEncryptor } from "../native/streamCipher.js"
import { done, failWith, needMore, type ReadError, WATCH_LIMIT_BYTES } from "../net/SocketReader.js"
import { type ConnectionTrace, traceRefusal } from "../telemetry/connectionTrace.js"
import type { RefusalLines } from "../log/refusalLines.js"
import { closeWith, disconnect, endLogin, letGo, loginEnder, tellLoginReadFailure } from "./closing.js"
import { MESSAGES } from "./messages.js"
import type { Admitted, Authentication } from "./phases.js"
import { type Answer, getText } from "./sessionHttp.js"

export const MOJANG_SESSION_SERVER = "https://sessionserver.mojang.com"

/**
 * Why `value` (`PORTAL_SESSION_SERVER`) cannot be a session service's base URL, or undefined when it can: http or
 * https, and no query or fragment, since `/session/minecraft/hasJoined?...` is added to it.
 */
export const sessionServerProblem = (value: string): string | undefined => {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return "not a URL"
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return `${url.protocol.replace(/:$/, "")} is not http or https`
  if (url.search !== "" || url.hash !== "") return "a base URL takes no query or fragment (/session/minecraft/hasJoined?... is added to it)"
  return undefined
}
/** How long the session service may take to answer `hasJoined`. */
export const SESSION_SERVICE_TIMEOUT_MS = 5_000
/** How long the player may take for Encryption Response (its client asks the session service first). */
const ENCRYPTION_RESPONSE_TIMEOUT_MS = 30_000
/** An Encryption Response is about 270 bytes; the signed form of 1.19 a few more. */
const MAX_ENCRYPTION_RESPONSE_BYTES = 8192
/** The session service could not tell: down, slow, or answering something that is not an answer. */
export class SessionServiceUnavailable extends Data.TaggedError("SessionServiceUnavailable")<{ readonly reason: string }> {
  override get message() {
    return this.reason
  }
}

export interface AuthenticationServices {
  readonly bans: BanDataPlane
  readonly clock: Clock.Clock
  /** The session service's base URL (`PORTAL_SESSION_SERVER`, else Mojang's). */
  readonly sessionServer: string
  readonly refusals: RefusalLines
  /** One session per authenticated UUID on the proxy. */
  readonly registry: Pick<PlayerRegistryDataPlane, "claimOnline">
  readonly stats: StatsDataPlane
  readonly timeoutMs?: number
}

export type AuthenticationPhase = (admitted: Admitted) => Effect.Effect<Admitted | undefined, ReadError>

let keys: ServerKeyPair | undefined
/** The process's key pair, made on the first client_only login (some milliseconds, once). */
const serverKeys = (): ServerKeyPair => (keys ??= generateServerKeyPair())

type ProfileModule = typeof import("./sessionProfile.js")
let profileModule: ProfileModule | undefined
let loadingProfileModule: Promise<ProfileModule> | undefined
/** Runs `use` with the decoder module: at once once it is loaded, after its import on the first login. */
const withProfileDecoder = <A, E>(use: (module: ProfileModule) => Effect.Effect<A, E>): Effect.Effect<A, E> => {
  if (profileModule !== undefined) return use(profileModule)
  const load = Effect.promise(() => (loadingProfileModule ??= import("./sessionProfile.js").then((module) => (profileModule = module))))
  return Effect.flatMap(load, use)
}

/** The session service's verdict. */
type HasJoined =
  | { readonly _tag: "Joined"; readonly profile: Authentication["profile"] }
  | { readonly _tag: "NotJoined" }

const describeRequestError = (error: unknown): string => {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause
    return cause instanceof Error ? `${error.message} (${cause.message})` : error.message
  }
  return String(error)
}

/** GET hasJoined; 200 with a profile, 204 (or 403, as some services say it) not joined, anything else unavailable. */
export const askHasJoined = (
  base: string,
  name: string,
  hash: string,
  timeoutMs: number
): Effect.Effect<HasJoined, SessionServiceUnavailable> => {
  const failed = (detail: string) => new SessionServiceUnavailable({ reason: `the session service at ${base} failed: ${detail}` })
  // One async step with the request's own timer (sessionHttp.ts): interrupting the login cancels the request.
  const request = Effect.async<Answer, SessionServiceUnavailable>((resume) => {
    let url: URL
    try {
      url = new URL(`${base.replace(/\/+$/, "")}/session/minecraft/hasJoined?username=${encodeURIComponent(name)}&serverId=${encodeURIComponent(hash)}`)
    } catch (error) {
      resume(Effect.fail(failed(describeRequestError(error))))
      return
    }
    const cancel = getText(url, timeoutMs, (outcome) =>
      resume(outcome._tag === "Answer" ? Effect.succeed(outcome.answer) : Effect.fail(failed(describeRequestError(outcome.error))))
    )
    return Effect.sync(cancel)
  })
  return Effect.flatMap(request, ({ status, text }): Effect.Effect<HasJoined, SessionServiceUnavailable> => {
    if (status === 204 || status === 403) return Effect.succeed({ _tag: "NotJoined" })
    if (status !== 200) return Effect.fail(new SessionServiceUnavailable({ reason: `the session service at ${base} answered HTTP ${status}` }))
    return withProfileDecoder(({ decodeSessionProfile }) => {
      const decoded = decodeSessionProfile(text)
      if (Either.isLeft(decoded)) {
        return Effect.fail(new SessionServiceUnavailable({ reason: `the session service at ${base} answered something that is not a profile: ${decoded.left}` }))
      }
      const profile = decoded.right
      const uuid = parseUuid(profile.id)
      if (uuid._tag === "Invalid") return Effect.fail(new SessionServiceUnavailable({ reason: uuid.reason }))
      return Effect.succeed<HasJoined>({
        _tag: "Joined",
        profile: {
          uuid: uuid.uuid,
          name: profile.name,
          properties: profile.properties.map(({ name, value, signature }) =>
            signature === undefined || signature === null ? { name, value } : { name, value, signature }
          )
        }
      })
    })
  })
}

/** Whether the client's verify token (or its signature over it) matches the one Portal sent. */
const verifyTokenMatches = (admitted: Admitted, response: EncryptionResponse, keyPair: ServerKeyPair, token: Buffer): boolean => {
  if (response._tag === "Token") {
    const decrypted = rsaDecrypt(keyPair.privateKey, response.verifyToken, token.length)
    return decrypted._tag === "Decrypted" && timingSafeEqual(decrypted.data, token)
  }
  const key = admitted.start.value.publicKey
  if (key === undefined) return false
  return verifySignedVerifyToken({ playerKeyDer: key.key, verifyToken: token, salt: response.salt, signature: response.signature })
}

/** The authentication's verdict on the connection's trace: `authenticated`, or why not (a refusal). */
const traceVerdict = (
  trace: ConnectionTrace | undefined,
  verdict: "authenticated" | "banned" | "unavailable" | "not_authenticated" | "already_connected"
): void => {
  if (trace === undefined) return
  trace.authenticationEnd = performance.now()
  trace.authentication = verdict
  if (verdict !== "authenticated") traceRefusal(trace, verdict)
}

/** An encrypted login Disconnect, then the close. */
const encryptedDisconnect = (socket: Socket, encrypt: StreamCipher, message: string): Effect.Effect<void> =>
  Effect.suspend(() => closeWith(socket, encrypt.update(encodeFrame(0x00, encodeLoginDisconnectBody(message), -1))))

export const makeAuthentication = ({
  bans,
  clock,
  sessionServer,
  refusals,
  registry,
  stats,
  timeoutMs = SESSION_SERVICE_TIMEOUT_MS
}: AuthenticationServices): AuthenticationPhase => {
  const afterEncryption = (admitted: Admitted, secret: Buffer, keyPair: ServerKeyPair): Effect.Effect<Admitted | undefined> => {
    const { opened } = admitted.route
    const client = opened.connection.socket
    const trace = opened.connection.trace
    const encrypt = createEncryptor(secret)
    const decrypt = createDecryptor(secret)
    // The secret is 16 bytes here (decryptSharedSecret checked it), so both ciphers exist.
    if (encrypt._tag === "Invalid" || decrypt._tag === "Invalid") return Effect.as(disconnect(client, MESSAGES.badEncryption), undefined)
    const refuse = (log: Effect.Effect<void>, message: string) => Effect.as(Effect.zipRight(log, encryptedDisconnect(client, encrypt, message)), undefined)
    // While the session service is asked, the login may be ended from outside (a kick, a ban: the Disconnect must be
    // encrypted now) or the player may leave (it is read on meanwhile, its bytes kept, still encrypted, so that a
    // close is noticed at once). Either drops the question, so the login does not hold its place until the service
    // answers or times out. One callback-driven wait for both: one race per login rather than two.
    const stopped = Effect.async<{ readonly _tag: "Ended"; readonly reason: string } | { readonly _tag: "Gone"; readonly why: string }>((resume) => {
      let over = false
      const cancelWatch = opened.reader.watch("the session service's answer", WATCH_LIMIT_BYTES, (why) => {
        if (over) return
        over = true
        resume(Effect.succeed({ _tag: "Gone", why }))
      })
      admitted.lease.attachEnder({
        end: (reason) => {
          if (!over) {
            over = true
            cancelWatch()
            resume(Effect.succeed({ _tag: "Ended", reason }))
          }
          endLogin(client, reason, encrypt)
        }
      })
      return Effect.sync(cancelWatch)
    })
    const name = admitted.start.value.name
    const hash = serverHash("", secret, keyPair.publicKeyDer)
    return Effect.raceFirst(Effect.either(askHasJoined(sessionServer, name, hash, timeoutMs)), stopped).pipe(
      Effect.flatMap((answer): Effect.Effect<Admitted | undefined> => {
        if (answer._tag === "Ended") {
          return Effect.as(letGo(client, `${admitted.who} was ended while the session service was asked: ${answer.reason}`), undefined)
        }
        // The question is dropped, so the login's place under max_players is given back now, not once it is answered.
        if (answer._tag === "Gone") {
          return Effect.as(letGo(client, `${admitted.who} left while the session service was asked (${answer.why})`), undefined)
        }
        if (answer._tag === "Left") {
          traceVerdict(trace, "unavailable")
          return refuse(Effect.logWarning(`could not authenticate ${admitted.who}: ${answer.left.reason}`), MESSAGES.sessionServiceDown)
        }
        if (answer.right._tag === "NotJoined") {
          traceVerdict(trace, "not_authenticated")
          return refuse(Effect.logInfo(`refused ${admitted.who}: the session service does not know this login (not authenticated)`), MESSAGES.notAuthenticated)
        }
        const { profile } = answer.right
        const who = `${profile.name} (${profile.uuid})`
        const now = clock.unsafeCurrentTimeMillis()
        const ban = bans.playerBan({ name: profile.name, uuid: profile.uuid }, now)
        if (ban !== undefined) {
          traceVerdict(trace, "banned")
          return refuse(Effect.logInfo(`refused ${who}: banned (${ban.reason})`), banMessage(ban, Math.floor(now / 1000)))
        }
        traceVerdict(trace, "authenticated")
        if (trace !== undefined) trace.player = profile.name
        if (client.destroyed || client.writableEnded) return Effect.as(Effect.logDebug(`${who} left while the session service was asked`), undefined)
        // The account once on the proxy: a second session could carry items from one server to another. Its name
        // too, in any case, as offline servers' players are known by it: nobody there may go by it meanwhile (nor
        // may this player while someone does), as BungeeCord and Velocity hold it.
        const claim = registry.claimOnline(profile.uuid)
        const nameClaim = claim._tag === "Taken" ? claim : registry.claimOnline(nameClaimKey(profile.name))
        if (claim._tag === "Taken" || nameClaim._tag === "Taken") {
          if (claim._tag === "Claimed") claim.release()
          traceVerdict(trace, "already_connected")
          stats.rejected("already_connected")
          return refuse(refusals.say("already_connected", "info", `refused ${who}: already connected to this proxy`), MESSAGES.alreadyConnected)
        }
        // The registry names the authenticated player from now on; the place under max_players stays theirs.
        let lease = admitted.lease
        if (claim._tag === "Claimed") lease = releasingAlso(lease, claim.release)
        if (nameClaim._tag === "Claimed") lease = releasingAlso(lease, nameClaim.release)
        lease.identify(profile.name, profile.uuid)
        lease.attachEnder(loginEnder(client, encrypt))
        const authentication: Authentication = { profile, encrypt, decrypt }
        return Effect.as(Effect.logDebug(`${who} authenticated`), { ...admitted, who, lease, authentication })
      })
    )
  }

  return (admitted) => {
    const { opened } = admitted.route
    const client = opened.connection.socket
    const trace = opened.connection.trace
    if (trace !== undefined) trace.authenticationStart = performance.now()
    const protocolVersion = opened.opening.handshake.protocolVersion
    // Admission let only versions the packet table knows into a packet mode.
    const ids = packetIdsFor(protocolVersion)!.login
    const keyPair = serverKeys()
    const token = newVerifyToken()
    const request = encodeEncryptionRequestBody({ serverId: "", publicKey: keyPair.publicKeyDer, verifyToken: token, shouldAuthenticate: true }, protocolVersion)
    client.write(encodeFrame(ids.clientbound.encryptionRequest, request, -1))
    const read = opened.reader.read("Encryption Response", MAX_ENCRYPTION_RESPONSE_BYTES, ENCRYPTION_RESPONSE_TIMEOUT_MS, (buffer) => {
      const frame = readFrame(buffer, 0, MAX_ENCRYPTION_RESPONSE_BYTES)
      if (frame._tag === "Incomplete") return needMore
      if (frame._tag === "Invalid") return failWith(frame.reason)
      if (frame.packetId !== ids.serverbound.encryptionResponse) return failWith(`expected Encryption Response, got packet ${frame.packetId}`)
      const response = decodeEncryptionResponseBody(buffer.subarray(frame.bodyStart, frame.end), protocolVersion)
      if (response._tag === "Invalid") return failWith(response.reason)
      return done(response.value, frame.end)
    }).pipe(Effect.catchAll(tellLoginReadFailure(client, refusals)))
    return Effect.flatMap(read, (response): Effect.Effect<Admitted | undefined> => {
      const secret = decryptSharedSecret(keyPair.privateKey, response.sharedSecret)
      if (secret._tag === "Invalid") {
        traceVerdict(trace, "not_authenticated")
        // Without the secret nothing can be encrypted for this client: the Disconnect goes as it is.
        return Effect.as(
          Effect.zipRight(Effect.logWarning(`refused ${admitted.who}: bad shared secret (${secret.reason})`), disconnect(client, MESSAGES.badEncryption)),
          undefined
        )
      }
      if (!verifyTokenMatches(admitted, response, keyPair, token)) {
        traceVerdict(trace, "not_authenticated")
        // The client encrypts from its Encryption Response on, with the secret it sent: so does the Disconnect.
        const encrypt = createEncryptor(secret.data)
        const said = encrypt._tag === "Cipher" ? encryptedDisconnect(client, encrypt, MESSAGES.badEncryption) : disconnect(client, MESSAGES.badEncryption)
        return Effect.as(Effect.zipRight(Effect.logWarning(`refused ${admitted.who}: the verify token does not match`), said), undefined)
      }
      return afterEncryption(admitted, secret.data, keyPair)
    })
  }
}
