/**
 * How a connection ends before a relay owns it: a last message (a Disconnect, a legacy kick, a status answer) is
 * flushed, then the socket closed; a refusal is said in the words the kind of client understands.
 */
import * as Effect from "effect/Effect"
import type { Socket } from "node:net"
import { NEXT_STATE_STATUS } from "../../protocol/handshake.js"
import { encodeLegacyKick } from "../../protocol/legacy.js"
import { encodeLoginDisconnect } from "../../protocol/login.js"
import type { StreamCipher } from "../../protocol/cipher.js"
import type { RefusalLines } from "../log/refusalLines.js"
import type { SessionEnder } from "../PlayerRegistry.js"
import type { ReadError } from "../net/SocketReader.js"
import { MESSAGES } from "./messages.js"
import type { SettledOpening } from "./phases.js"

/** How long a closing connection may take to flush its last message (ms). */
const CLOSE_FLUSH_TIMEOUT_MS = 2_000

/**
 * Writes a last message (or nothing), half-closes, and calls `then` once it has left or the peer is gone (bounded by
 * a plain timer), the socket destroyed; the returned canceler destroys it at once instead, without calling `then`.
 */
export const closeThen = (socket: Socket, data: Buffer | undefined, then: () => void): (() => void) => {
  if (socket.destroyed) {
    then()
    return () => {}
  }
  const finish = () => {
    clearTimeout(timer)
    socket.off("close", finish)
    socket.destroy()
    then()
  }
  const timer = setTimeout(finish, CLOSE_FLUSH_TIMEOUT_MS)
  socket.once("close", finish)
  if (data === undefined) socket.end()
  else socket.end(data)
  return () => {
    clearTimeout(timer)
    socket.off("close", finish)
    socket.destroy()
  }
}

/** How long a login ended from outside may take to flush its Disconnect (ms). */
const KICK_FLUSH_MS = 2_000

/**
 * Ends a login from outside (a kick, a ban) before a relay owns it: the login Disconnect with `reason`, through
 * `encrypt` once the connection is encrypted, then the socket destroyed after KICK_FLUSH_MS at most.
 */
export const endLogin = (socket: Socket, reason: string, encrypt?: StreamCipher): void => {
  if (socket.destroyed || socket.writableEnded) return
  const frame = encodeLoginDisconnect(reason)
  socket.end(encrypt === undefined ? frame : encrypt.update(frame))
  setTimeout(() => socket.destroy(), KICK_FLUSH_MS).unref()
}

/** The registry's way to end the login on `socket` (see `endLogin`). */
export const loginEnder = (socket: Socket, encrypt?: StreamCipher): SessionEnder => ({ end: (reason) => endLogin(socket, reason, encrypt) })

/** Writes a last message, half-closes, and waits (bounded by a plain timer) for it to leave. */
export const closeWith = (socket: Socket, data: Buffer | undefined): Effect.Effect<void> =>
  Effect.async<void>((resume) => Effect.sync(closeThen(socket, data, () => resume(Effect.void))))

/** A login let go without a word to the player (it left, or was told already): a debug line, then the close. */
export const letGo = (socket: Socket, line: string): Effect.Effect<void> => Effect.zipRight(Effect.logDebug(line), closeWith(socket, undefined))

/** A login-state Disconnect with `message`, then the close. */
export const disconnect = (socket: Socket, message: string): Effect.Effect<void> => closeWith(socket, encodeLoginDisconnect(message))

/** Refuses a connection in the words its kind of client understands: a disconnect for logins, silence for pings. */
export const refuse = (socket: Socket, opening: SettledOpening, message: string): Effect.Effect<void> => {
  switch (opening._tag) {
    case "Modern":
      return opening.handshake.nextState === NEXT_STATE_STATUS ? closeWith(socket, undefined) : disconnect(socket, message)
    case "LegacyLogin":
      return closeWith(socket, encodeLegacyKick(message.replace(/§./g, "")))
    case "LegacyPing":
      return closeWith(socket, undefined)
  }
}

/**
 * A read in the login state that failed (Login Start, Encryption Response), told to the player where the protocol
 * allows: a malformed or oversized packet gets the bad-packet Disconnect (and a warning with the reason), too
 * long a wait "took too long to log in"; a player that left gets nothing. The warning is bounded like every refused
 * login's line (log/refusalLines.ts): garbage sent after a handshake costs an attacker nothing. The failure goes on,
 * for the pipeline to count and trace. The Disconnect is plain: a client that sent a malformed Encryption Response
 * cannot be told in its cipher, whose secret Portal could not read.
 */
export const tellLoginReadFailure = (socket: Socket, refusals: RefusalLines) => (error: ReadError): Effect.Effect<never, ReadError> => {
  switch (error._tag) {
    case "ConnectionClosed":
      return Effect.fail(error)
    case "ReadTimeout":
      return Effect.zipRight(disconnect(socket, MESSAGES.loginTooSlow), Effect.fail(error))
    default:
      return refusals.say("bad_packet", "warning", `refused a login: the client sent a packet the proxy could not read (${error.message})`).pipe(
        Effect.zipRight(disconnect(socket, MESSAGES.badPacket)),
        Effect.zipRight(Effect.fail(error))
      )
  }
}
