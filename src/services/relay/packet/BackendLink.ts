/**
 * The backend side of a packet session: its socket, the decoder of what it sends, the compression threshold of its
 * connection and the protocol state it is in. A session holds one link at a time; the player's connection is not
 * part of it, so a later server switch can put a new link under the same player (log in to the next backend, then
 * swap) without touching the player's framing, compression or encryption.
 */
import type { Socket } from "node:net"
import { encodeFrame, FrameDecoder, MAX_PACKET_LENGTH } from "../../../protocol/framing.js"
import { type Destination, destinationOf, writeTo } from "./directWrite.js"

/** Protocol states after the handshake, as the packet relay tracks them. */
export type PacketState = "login" | "configuration" | "play"

export class BackendLink {
  /** Frames the backend sends (clientbound), taken as a vanilla client takes them. */
  readonly decoder = new FrameDecoder(MAX_PACKET_LENGTH, "accept")
  /** The connection's compression threshold, both directions (-1: off until the backend's Set Compression). */
  threshold = -1
  /** The state of what the backend sends. */
  state: PacketState = "login"
  /** Bytes read from the backend (the watchdog's read mark). */
  bytesRead = 0
  /** Bytes handed to the backend's socket. */
  bytesHanded = 0
  /** Whether the backend has accepted the login (its Login Success went to the player). */
  loggedIn = false

  private readonly destination: Destination

  constructor(readonly socket: Socket) {
    this.destination = destinationOf(socket)
  }

  write(bytes: Buffer): void {
    this.bytesHanded += bytes.length
    writeTo(this.destination, bytes)
  }

  /** A packet of Portal's own, in the connection's format. */
  writePacket(packetId: number, body: Buffer): void {
    this.write(encodeFrame(packetId, body, this.threshold))
  }
}
