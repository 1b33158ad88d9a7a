/**
 * The packet relay (`offline`, `client_only`): Portal owns the player's connection for its whole life and logs into
 * the backend itself. Both directions are split into frames (one FrameDecoder each); the state of each side is
 * tracked (login, configuration, play, and play back to configuration when a 1.20.2+ backend reconfigures); only the
 * packets Portal needs are decoded, and every other frame passes on as the bytes it arrived as: frames that follow
 * each other in a received chunk leave in one write, without a copy (client_only encrypts them towards the player,
 * which is the one copy of that direction).
 *
 * The player's side (decoder, compression threshold, encryption, the state its client is in) belongs to the relay;
 * the backend's (socket, decoder, threshold, state) is a BackendLink that a server switch can later replace. Today
 * the player's threshold follows the backend's Set Compression, so frames pass without re-framing; where the two
 * differ (a later switch), frames are re-framed (`reencodeFrame`).
 *
 * The backend login: Portal sends the handshake the join built (with legacy / legacy_guard forwarding), its own
 * Login Start (the authenticated profile in client_only; a 1.19-1.19.2 player's chat key where it fits), answers `velocity:player_info` itself (modern
 * forwarding), passes other login plugin requests to the player (their answers come back as they are), follows Set
 * Compression (the player gets it too), refuses a backend that asks for encryption, and forwards Login Success.
 */
import type { Socket } from "node:net"
import { isBungeeChannel } from "../../../protocol/bungeeChannel.js"
import type { StreamCipher } from "../../../protocol/cipher.js"
import { forgeProperties } from "../../../protocol/forwarding.js"
import { type Frame, FrameDecoder, frameBody, peekPacket, readPacket, reencodeFrame, encodeFrame } from "../../../protocol/framing.js"
import { decodeDisconnectBody, decodePluginMessageBody, encodeChatToPlayer, encodeDisconnectBody, encodePluginMessageBody } from "../../../protocol/gamePackets.js"
import { encodeLoginStartBody } from "../../../protocol/login.js"
import {
  decodeLoginDisconnectBody,
  decodeLoginPluginRequestBody,
  decodeLoginSuccessBody,
  decodeSetCompressionBody,
  encodeLoginDisconnectBody,
  encodeLoginPluginResponseBody,
  encodeSetCompressionBody
} from "../../../protocol/loginPackets.js"
import { encodeModernForwardingResponse, MODERN_FORWARDING_CHANNEL } from "../../../protocol/modernForwarding.js"
import { PacketReader } from "../../../protocol/PacketReader.js"
import { type PacketIds, packetIdsFor } from "../../../protocol/packetIds.js"
import { plainText, type TextComponent } from "../../../protocol/text.js"
import { PV_1_13, PV_1_19_1, PV_1_20_2, PV_1_8 } from "../../../protocol/versions.js"
import { MESSAGES } from "../../session/messages.js"
import { LINGER_MS, type ByteMeter, type LiveRelay, type RelayEnd, type RelayOutcome, type RelayStart } from "../RelayMode.js"
import type { RelayWatchdog, Watched } from "../watchdog.js"
import { BackendLink, type PacketState } from "./BackendLink.js"
import { type BungeePeer, handleBungeeRequest, liveSessions } from "./bungee.js"
import { Coalescer } from "./coalesce.js"
import { type Destination, destinationOf, writeTo } from "./directWrite.js"
import { canReadWithUserBuffers, forgetReader, isSharedReadBuffer, readWithUserBuffers, sharedReadBuffer } from "../userBufferRead.js"
import type { PacketStart } from "./PacketStart.js"
import { sendMark } from "../sendMark.js"

/**
 * Compressed clientbound frames up to this inflated size are peeked at for a BungeeCord request (when the channel is
 * on): a plugin's request is a few hundred bytes, and a peek costs 2-3 µs (protocol/framing.ts), so chunk data and
 * other large packets are not looked at.
 */
const BUNGEE_PEEK_MAX = 32_768 + 256

/** The channel of a plugin message body (undefined when it is not readable). */
const pluginChannel = (body: Buffer, protocolVersion: number): string | undefined => {
  try {
    return new PacketReader(body).string(protocolVersion < PV_1_13 ? 20 : 32_767, "channel")
  } catch {
    return undefined
  }
}

export class PacketRelay implements LiveRelay, BungeePeer {
  readonly meter: ByteMeter
  readonly name: string
  readonly uuid: string
  readonly serverId: string
  readonly clientIp: string
  readonly clientPort: number
  readonly protocolVersion: number
  private readonly ids: PacketIds
  private readonly player: Socket
  private readonly playerOut: Destination
  /** Bytes handed to the player's socket by the relay (direct sends included, which Node does not count). */
  private playerBytesOut = 0
  private readonly playerDecoder = new FrameDecoder()
  /** Compression threshold of the player's connection, both directions (-1: off). */
  private playerThreshold = -1
  private readonly encrypt: StreamCipher | undefined
  /** The state the player's client is in for what Portal sends it. */
  private clientState: PacketState = "login"
  /** The state of what the player sends. */
  private serverboundState: PacketState = "login"
  private link: BackendLink
  private readonly up: Coalescer
  private readonly down: Coalescer
  private readonly watched: Watched
  /** Set once the session is ending: how it ends. */
  private closing: RelayEnd | undefined = undefined
  private closingDetail: string | undefined = undefined
  private done = false
  private lingerTimer: NodeJS.Timeout | undefined = undefined
  private playerPaused = false
  private backendPaused = false

  constructor(
    private readonly request: RelayStart,
    private readonly start: PacketStart,
    ids: PacketIds,
    private readonly watchdog: RelayWatchdog
  ) {
    const { login } = start
    this.player = request.client
    this.name = login.name
    this.uuid = login.uuid
    this.serverId = start.serverId
    this.clientIp = login.clientIp
    this.clientPort = login.clientPort
    this.protocolVersion = login.protocolVersion
    this.ids = ids
    this.encrypt = start.encryption?.encrypt
    this.link = new BackendLink(request.backend)
    this.up = new Coalescer((bytes) => this.link.write(bytes))
    this.down = new Coalescer((bytes) => this.writeToPlayer(bytes))
    const player = this.player
    this.playerOut = destinationOf(player)
    const outBefore = player.bytesWritten
    this.meter = { bytesIn: () => player.bytesRead, bytesOut: () => outBefore + this.playerBytesOut }
    this.watched = watchdog.add(
      {
        sample: (into) => {
          const socket = this.link.socket
          into.readMark = this.link.bytesRead
          into.blocked = socket.writableNeedDrain
          into.written = sendMark(socket, this.link.bytesHanded, into.blocked)
          into.playerBlocked = player.writableNeedDrain
          into.playerWritten = sendMark(player, this.playerBytesOut, into.playerBlocked)
        }
      },
      request.timeouts,
      (end) => {
        // The watchdog checks again until the session is gone, lingering included: a session already ending
        // has said why once.
        if (this.closing !== undefined) return
        if (end === "player_timeout") return this.sayAndClose(undefined, end)
        start.log.info(`the backend ${end === "read_timeout" ? "sent nothing" : "took nothing"} for too long`)
        this.sayAndClose(MESSAGES.backendTimedOut, end)
      }
    )
    player.on("end", this.onPlayerEnd).on("error", this.onPlayerError).on("close", this.onPlayerClose)
    this.attachBackend(this.link)
    liveSessions.add(this)
    // The backend first hears the handshake, then Portal's own Login Start for the player, with a 1.19-1.19.2 player's
    // chat key as BungeeCord and Velocity send it: a backend that enforces secure profiles (those versions' default)
    // refuses a login without one. From 1.19.1 a key is signed for one UUID and the backend checks it against the
    // player's UUID as it knows it, so it goes only where that is the key's own (client_only, an honest client): an
    // offline-mode UUID would turn it into a refusal for a bad key.
    const keyFits = login.protocolVersion < PV_1_19_1 || login.keyHolder === login.uuid
    const loginStart = encodeLoginStartBody({
      name: login.name,
      uuid: login.uuid,
      protocolVersion: login.protocolVersion,
      publicKey: keyFits ? login.publicKey : undefined
    })
    this.link.write(Buffer.concat([start.preface, encodeFrame(ids.login.serverbound.loginStart, loginStart, -1)]))
    if (start.encryption !== undefined) this.playerDecoder.setDecryption(start.encryption.decrypt)
    if (start.buffered.length > 0) this.onPlayerData(start.buffered)
    if (!this.closing) readFrom(player, this.onPlayerData)
  }

  private attachBackend(link: BackendLink): void {
    link.socket.on("end", this.onBackendEnd).on("error", this.onBackendError).on("close", this.onBackendClose)
    readFrom(link.socket, this.onBackendData)
  }

  private detachBackend(link: BackendLink): void {
    stopReading(link.socket, this.onBackendData)
    link.socket.off("end", this.onBackendEnd).off("error", this.onBackendError).off("close", this.onBackendClose)
  }

  // --- writing ---------------------------------------------------------------------------------------------------

  private writeToPlayer(bytes: Buffer): void {
    if (this.player.destroyed) return
    this.playerBytesOut += bytes.length
    writeTo(this.playerOut, this.encrypt === undefined ? bytes : this.encrypt.update(bytes))
  }

  /** A packet of Portal's own to the player, after what is already on its way. */
  private writePlayerPacket(packetId: number, body: Buffer): void {
    this.down.flush()
    this.writeToPlayer(encodeFrame(packetId, body, this.playerThreshold))
  }

  /** A clientbound frame on to the player: as received when both connections frame alike, else re-framed. */
  private passDown(frame: Frame): void {
    if (this.link.threshold === this.playerThreshold) return this.down.add(frame.buffer, frame.start, frame.end)
    const bytes = reencodeFrame(frame, this.link.threshold, this.playerThreshold)
    if (!Buffer.isBuffer(bytes)) return this.backendBroke(bytes.reason)
    this.down.flush()
    this.writeToPlayer(bytes)
  }

  private passUp(frame: Frame): void {
    if (this.link.threshold === this.playerThreshold) return this.up.add(frame.buffer, frame.start, frame.end)
    const bytes = reencodeFrame(frame, this.playerThreshold, this.link.threshold)
    if (!Buffer.isBuffer(bytes)) return this.badPlayerInput(bytes.reason)
    this.up.flush()
    this.link.write(bytes)
  }

  /** The Disconnect for the state the player's client is in, in the format of its version. */
  private disconnectFrame(reason: TextComponent): Buffer {
    const ids = this.ids
    switch (this.clientState) {
      case "login":
        return encodeFrame(ids.login.clientbound.disconnect, encodeLoginDisconnectBody(reason), this.playerThreshold)
      case "configuration":
        return encodeFrame(ids.configuration!.clientbound.disconnect, encodeDisconnectBody(reason, this.protocolVersion), this.playerThreshold)
      case "play":
        return encodeFrame(ids.play.clientbound.disconnect, encodeDisconnectBody(reason, this.protocolVersion), this.playerThreshold)
    }
  }

  // --- from the player -------------------------------------------------------------------------------------------

  private readonly onPlayerData = (chunk: Buffer): void => {
    if (this.closing !== undefined) return
    const decoder = this.playerDecoder
    decoder.push(chunk)
    for (;;) {
      const frame = decoder.next()
      if (frame._tag === "Incomplete") break
      if (frame._tag === "Invalid") return this.badPlayerInput(frame.reason)
      this.onPlayerFrame(frame)
      if (this.closing !== undefined) return
    }
    this.up.flush()
    if (isSharedReadBuffer(chunk)) decoder.ownBuffered()
    const backend = this.link.socket
    if (backend.writableNeedDrain && !this.playerPaused) {
      this.playerPaused = true
      this.player.pause()
      backend.once("drain", this.resumePlayer)
    }
  }

  private readonly resumePlayer = (): void => {
    this.playerPaused = false
    if (this.closing === undefined) this.player.resume()
  }

  private onPlayerFrame(frame: Frame): void {
    let id = frame.packetId
    // The body is looked at only for plugin messages: no view of it for every other frame.
    let body: Buffer | undefined
    if (id < 0) {
      // A compressed frame from the player is inflated once: its size claim is checked before the backend sees it.
      const packet = readPacket(frame)
      if (packet._tag === "Invalid") return this.badPlayerInput(packet.reason)
      id = packet.packetId
      body = packet.body
    }
    const ids = this.ids
    switch (this.serverboundState) {
      case "login":
        if (id === ids.login.serverbound.loginAcknowledged) this.serverboundState = "configuration"
        break
      case "configuration": {
        const sb = ids.configuration!.serverbound
        if (id === sb.finishConfiguration) this.serverboundState = "play"
        else if (id === sb.pluginMessage && this.posesAsProxy(frame, body)) return
        break
      }
      case "play":
        if (id === ids.play.serverbound.configurationAcknowledged) this.serverboundState = "configuration"
        else if (id === ids.play.serverbound.pluginMessage && this.posesAsProxy(frame, body)) return
        break
    }
    this.passUp(frame)
  }

  /**
   * Only the proxy speaks on the BungeeCord channel: a player's message on it is dropped, in configuration as in
   * play (BungeeCord drops these too), when the channel is on (the backend then trusts what comes on it).
   */
  private posesAsProxy(frame: Frame, body: Buffer | undefined): boolean {
    if (this.start.channel === undefined) return false
    const channel = pluginChannel(body ?? frameBody(frame)!, this.protocolVersion)
    if (channel === undefined || !isBungeeChannel(channel)) return false
    this.start.log.debug(`dropped a ${channel} plugin message from the player`)
    return true
  }

  /** Bytes from the player that break the protocol: said to the player where possible, logged, both closed. */
  private badPlayerInput(reason: string): void {
    this.start.log.warning(`bad packet from the player: ${reason}`)
    this.sayAndClose(MESSAGES.badPacket, "error", `bad packet from the player: ${reason}`)
  }

  private readonly onPlayerEnd = (): void => {
    if (this.closing !== undefined) return this.finish()
    this.closing = "client_closed"
    this.up.flush()
    this.link.socket.end()
    this.linger()
  }

  private readonly onPlayerError = (error: Error): void => {
    if (this.closing !== undefined) return this.finish()
    this.closing = "error"
    this.closingDetail = `player: ${error.message}`
    this.finish()
  }

  private readonly onPlayerClose = (): void => {
    if (this.closing === undefined) this.closing = "client_closed"
    this.finish()
  }

  // --- from the backend ------------------------------------------------------------------------------------------

  private readonly onBackendData = (chunk: Buffer): void => {
    const link = this.link
    link.bytesRead += chunk.length
    if (this.closing !== undefined) return
    const decoder = link.decoder
    decoder.push(chunk)
    for (;;) {
      const frame = decoder.next()
      if (frame._tag === "Incomplete") break
      if (frame._tag === "Invalid") return this.backendBroke(frame.reason)
      if (link.state === "login") this.onBackendLoginFrame(frame)
      else this.onBackendFrame(frame)
      if (this.closing !== undefined) return
    }
    this.down.flush()
    if (isSharedReadBuffer(chunk)) decoder.ownBuffered()
    if (this.player.writableNeedDrain && !this.backendPaused) {
      this.backendPaused = true
      link.socket.pause()
      this.player.once("drain", this.resumeBackend)
    }
  }

  private readonly resumeBackend = (): void => {
    this.backendPaused = false
    if (this.closing === undefined) this.link.socket.resume()
  }

  /**
   * Configuration and play: only state changes, Disconnects and (with the channel on) BungeeCord requests matter.
   * A compressed frame can be any of them (a long Disconnect, a plugin message, and every packet at a threshold of
   * 0 or 1), so its id is peeked: a few bytes inflated, 2 to 3 µs, not the whole packet.
   */
  private onBackendFrame(frame: Frame): void {
    const link = this.link
    let id = frame.packetId
    if (id < 0) {
      const peek = peekPacket(frame, 0)
      if (peek._tag === "Invalid") return this.backendBroke(peek.reason)
      id = peek.packetId
    }
    const ids = this.ids
    if (link.state === "configuration") {
      const cb = ids.configuration!.clientbound
      if (id === cb.finishConfiguration) {
        link.state = "play"
        this.clientState = "play"
      } else if (id === cb.disconnect) return this.relayDisconnect(frame)
    } else {
      const cb = ids.play.clientbound
      if (id === cb.startConfiguration) {
        link.state = "configuration"
        this.clientState = "configuration"
      } else if (id === cb.disconnect) {
        return this.relayDisconnect(frame)
      } else if (id === cb.pluginMessage && this.start.channel !== undefined && this.bungeeRequestIn(frame)) return
    }
    this.passDown(frame)
  }

  /** A clientbound plugin message frame: handled (and not forwarded) when it is a BungeeCord request. */
  private bungeeRequestIn(frame: Frame): boolean {
    const body = frameBody(frame)
    if (body !== undefined) return this.bungeeRequest(body)
    // Compressed: inflated whole, up to the largest request a backend sends (a Forward of 32 KiB and its headers).
    if (frame.uncompressedLength > BUNGEE_PEEK_MAX) return false
    const packet = readPacket(frame)
    return packet._tag === "Packet" && this.bungeeRequest(packet.body)
  }

  /** A clientbound plugin message: handled (and not forwarded) when it is on the BungeeCord channel. */
  private bungeeRequest(body: Buffer): boolean {
    const message = decodePluginMessageBody(body, this.protocolVersion)
    if (message._tag === "Invalid" || !isBungeeChannel(message.value.channel)) return false
    this.down.flush()
    // A copy: answers can come later (lookups with worker threads), and the body may be in the shared read buffer.
    handleBungeeRequest(this, message.value.channel, Buffer.from(message.value.data), this.start.channel!, this.start.log)
    return true
  }

  /** The backend's login: read packet by packet (a handful per player). */
  private onBackendLoginFrame(frame: Frame): void {
    const packet = readPacket(frame)
    if (packet._tag === "Invalid") return this.backendBroke(packet.reason)
    const link = this.link
    const cb = this.ids.login.clientbound
    const id = packet.packetId
    if (id === cb.setCompression) {
      const threshold = decodeSetCompressionBody(packet.body)
      if (threshold._tag === "Invalid") return this.backendBroke(threshold.reason)
      const value = threshold.value < 0 ? -1 : threshold.value
      // The player follows the backend, so frames pass between them as they are.
      if (this.protocolVersion >= PV_1_8) this.writePlayerPacket(cb.setCompression, encodeSetCompressionBody(threshold.value))
      this.playerThreshold = value
      this.playerDecoder.setCompression(value)
      link.threshold = value
      link.decoder.setCompression(value)
      return
    }
    if (id === cb.loginPluginRequest) {
      const request = decodeLoginPluginRequestBody(packet.body)
      if (request._tag === "Invalid") return this.backendBroke(request.reason)
      if (request.value.channel === MODERN_FORWARDING_CHANNEL && this.start.modernSecret !== undefined) {
        return this.answerModernForwarding(request.value.messageId, request.value.data)
      }
      return this.passDown(frame)
    }
    if (id === cb.encryptionRequest) {
      this.start.log.warning("the backend asked for encryption: it runs in online mode, which a packet mode cannot log in to")
      return this.sayAndClose(MESSAGES.backendOnlineMode, "error", "the backend runs in online mode")
    }
    if (id === cb.loginSuccess) {
      // Read whole: the states of both connections move on it, so a broken one must not reach the player as it is.
      const success = decodeLoginSuccessBody(packet.body, this.protocolVersion)
      if (success._tag === "Invalid") return this.backendBroke(success.reason)
      link.loggedIn = true
      const next: PacketState = this.protocolVersion >= PV_1_20_2 ? "configuration" : "play"
      link.state = next
      this.clientState = next
      if (next === "play") this.serverboundState = "play"
      return this.passDown(frame)
    }
    if (id === cb.disconnect) {
      const reason = decodeLoginDisconnectBody(packet.body)
      if (reason._tag === "Invalid") return this.backendBroke(reason.reason)
      this.start.log.info(`the backend refused the login: ${plainText(reason.value)}`)
      this.passDown(frame)
      return this.endAfterDisconnect()
    }
    // Cookie Request (1.20.5+) is the one other login packet a backend may send; anything else is not the protocol.
    if (id !== cb.cookieRequest) return this.backendBroke(`packet 0x${id.toString(16).padStart(2, "0")} is not a login packet`)
    this.passDown(frame)
  }

  /** The backend's Disconnect in configuration or play (read whole, a rare packet): passed on, and the session ends. */
  private relayDisconnect(frame: Frame): void {
    // Compressed or not, the reason is checked before the player gets it (a Disconnect comes once).
    const packet = readPacket(frame)
    if (packet._tag === "Invalid") return this.backendBroke(packet.reason)
    const reason = decodeDisconnectBody(packet.body, this.protocolVersion)
    if (reason._tag === "Invalid") return this.backendBroke(reason.reason)
    // Said as the login's refusal is: the "left" line alone would only say that the backend closed.
    this.start.log.info(`the backend disconnected the player: ${plainText(reason.value)}`)
    this.passDown(frame)
    this.endAfterDisconnect()
  }

  /**
   * The player has the backend's Disconnect: nothing may follow it, so both connections end now rather than when the
   * backend closes (a backend that never does would hold the player until the read timeout, then send a second one).
   */
  private endAfterDisconnect(): void {
    this.sayAndClose(undefined, "backend_closed")
  }

  private answerModernForwarding(messageId: number, data: Buffer): void {
    const { login, modernSecret } = this.start
    const answer = encodeModernForwardingResponse({
      secret: modernSecret!,
      requestData: data,
      protocolVersion: login.protocolVersion,
      clientIp: login.clientIp,
      uuid: login.uuid,
      name: login.name,
      properties: [...login.properties, ...forgeProperties(login.addressSuffix, "modern")],
      publicKey: login.publicKey,
      keyHolder: login.keyHolder
    })
    if (answer._tag === "Invalid") return this.backendBroke(`modern forwarding: ${answer.reason}`)
    this.start.log.debug(`answered the backend's modern forwarding request (version ${answer.version})`)
    this.up.flush()
    this.link.writePacket(this.ids.login.serverbound.loginPluginResponse!, encodeLoginPluginResponseBody({ messageId, data: answer.data }))
  }

  /** Bytes from the backend that break the protocol. */
  private backendBroke(reason: string): void {
    this.start.log.warning(`bad packet from the backend: ${reason}`)
    this.sayAndClose(MESSAGES.backendBroke, "error", `bad packet from the backend: ${reason}`)
  }

  private readonly onBackendEnd = (): void => {
    if (this.closing !== undefined) return
    this.backendGone("backend_closed", undefined)
  }

  private readonly onBackendError = (error: Error): void => {
    if (this.closing !== undefined) return
    this.backendGone("error", `backend: ${error.message}`)
  }

  private readonly onBackendClose = (): void => {
    if (this.closing !== undefined) {
      if (this.player.destroyed) this.finish()
      return
    }
    this.backendGone("backend_closed", undefined)
  }

  /** The backend closed: the player gets what it sent, then its reason or Portal's, then the close. */
  private backendGone(end: RelayEnd, detail: string | undefined): void {
    const link = this.link
    if (!link.loggedIn) this.start.log.info("the backend closed the connection during the login")
    this.sayAndClose(this.start.backendClosedMessage, end, detail)
  }

  // --- the BungeeCord channel's view of this session -------------------------------------------------------------

  /** Whether a plugin message to the backend would be sent now: both sides in play, the session not ending. */
  get reachesBackend(): boolean {
    return this.closing === undefined && this.link.state === "play" && this.serverboundState === "play"
  }

  /** A plugin message to this player's backend (Forward, and the channel's answers); only once in play. */
  sendToBackend(channel: string, data: Buffer): void {
    if (!this.reachesBackend) return
    this.up.flush()
    this.link.writePacket(this.ids.play.serverbound.pluginMessage, encodePluginMessageBody({ channel, data }, this.protocolVersion))
  }

  /** A system chat message to the player, in play. */
  sendChat(message: TextComponent): void {
    if (this.closing !== undefined || this.clientState !== "play") return
    const chat = encodeChatToPlayer(message, this.protocolVersion)
    const id = this.ids.play.clientbound[chat.packet]
    if (id !== undefined) this.writePlayerPacket(id, chat.body)
  }

  // --- ending ----------------------------------------------------------------------------------------------------

  /** Ends the session with a Disconnect in the player's state; the backend is closed at once. */
  end(reason: TextComponent): void {
    if (this.closing !== undefined) return
    this.sayAndClose(reason, "ended", typeof reason === "string" ? reason : plainText(reason))
  }

  /** Ends both connections; `message` is the player's Disconnect, undefined when they have the backend's already. */
  private sayAndClose(message: TextComponent | undefined, end: RelayEnd, detail?: string): void {
    if (this.closing !== undefined) return
    this.closing = end
    this.closingDetail = detail
    this.up.drop()
    this.down.flush()
    this.detachBackend(this.link)
    this.link.socket.on("error", ignore)
    this.link.socket.destroy()
    const player = this.player
    if (!player.destroyed && !player.writableEnded) {
      if (message !== undefined) this.writeToPlayer(this.disconnectFrame(message))
      player.end()
    }
    // Reading goes on (and is dropped) so the close is a FIN, not a reset that could lose the message.
    if (this.playerPaused) this.resumePlayer()
    this.linger()
  }

  private linger(): void {
    if (this.lingerTimer !== undefined) return
    this.lingerTimer = setTimeout(() => this.finish(), LINGER_MS)
    this.lingerTimer.unref()
  }

  private finish(): void {
    if (this.done) return
    this.done = true
    clearTimeout(this.lingerTimer)
    liveSessions.remove(this)
    this.up.drop()
    this.down.drop()
    const player = this.player
    stopReading(player, this.onPlayerData)
    player.off("end", this.onPlayerEnd).off("error", this.onPlayerError).off("close", this.onPlayerClose)
    player.on("error", ignore)
    this.detachBackend(this.link)
    this.link.socket.on("error", ignore)
    player.destroy()
    this.link.socket.destroy()
    this.watchdog.delete(this.watched)
    const end = this.closing ?? "error"
    const outcome: RelayOutcome = this.closingDetail === undefined ? { end } : { end, detail: this.closingDetail }
    this.request.onEnd(outcome)
  }
}

const ignore = (): void => {}

/**
 * Reads `socket` into the shared read buffer from now on (relay/userBufferRead.ts), `onData` getting each read as a
 * view that is valid until it returns; where Node does not offer that, by `data` events. What Node had already read
 * comes first.
 */
const readFrom = (socket: Socket, onData: (chunk: Buffer) => void): void => {
  if (!canReadWithUserBuffers(socket)) {
    socket.on("data", onData)
    socket.resume()
    return
  }
  for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null) onData(chunk)
  readWithUserBuffers(socket, { onRead: (length, buffer) => onData(buffer.subarray(0, length)), readBuffer: sharedReadBuffer })
}

/** Reads of `socket` go nowhere from now on. */
const stopReading = (socket: Socket, onData: (chunk: Buffer) => void): void => {
  socket.off("data", onData)
  forgetReader(socket)
}

/** Starts a packet session; a start without a login or for an unknown version ends at once (a bug upstream). */
export const startPacketRelay = (request: RelayStart, watchdog: RelayWatchdog): LiveRelay => {
  const packet = request.packet
  const ids = packet === undefined ? undefined : packetIdsFor(packet.login.protocolVersion)
  if (packet === undefined || ids === undefined) {
    request.client.destroy()
    request.backend.destroy()
    request.onEnd({ end: "error", detail: packet === undefined ? "a packet mode was started without a login" : "unknown protocol version" })
    return { meter: { bytesIn: () => 0, bytesOut: () => 0 }, end: () => {} }
  }
  return new PacketRelay(request, packet, ids, watchdog)
}
