/** Configuration and play codecs, encoded by Portal and read by minecraft-protocol, and the reverse, across versions. */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import {
  decodeDisconnectBody,
  decodeKeepAliveBody,
  decodePluginMessageBody,
  encodeChatToPlayer,
  encodeDisconnectBody,
  encodeKeepAliveBody,
  encodePluginMessageBody,
  encodeTransferBody
} from "../../src/protocol/gamePackets.js"
import { EMPTY_BODY } from "../../src/protocol/loginPackets.js"
import { PacketWriter } from "../../src/protocol/PacketWriter.js"
import { type TextComponent, textComponentNbt } from "../../src/protocol/text.js"
import { NIL_UUID } from "../../src/protocol/uuid.js"
import { type Direction, idsOf, mcDecode, mcEncode, mcLong, nbt, type State } from "./mcPeer.js"
import { GAME_TEST_VERSIONS } from "./versions.js"

const ok = <A>(decoded: { _tag: "Ok"; value: A } | { _tag: "Invalid"; reason: string }): A => {
  if (decoded._tag === "Invalid") throw new Error(decoded.reason)
  return decoded.value
}

const reason = { text: "Server closed", color: "red", extra: [{ text: " (restart)", italic: true }] }
/** As the client reads it: NBT bytes come back from prismarine-nbt with bytes for booleans. */
const reasonAsNbt = { text: "Server closed", color: "red", extra: [{ text: " (restart)", italic: 1 }] }

/** A text field as minecraft-protocol decoded it: a JSON string, or typed NBT from 765. */
const textOf = (value: unknown, pv: number): unknown => (pv >= 765 ? nbt.simplify(value) : JSON.parse(value as string))
/** A text field for minecraft-protocol to write. */
const mcText = (component: TextComponent, pv: number): unknown =>
  pv >= 765 ? nbt.protos.big.parsePacketBuffer("anonymousNbt", textComponentNbt(component)).data : JSON.stringify(component)

describe.each(GAME_TEST_VERSIONS)("configuration and play packets, protocol %i", (pv) => {
  const ids = idsOf(pv)
  const states: Array<State> = ids.configuration === undefined ? ["play"] : ["configuration", "play"]

  for (const state of states) {
    const table = state === "play" ? ids.play : ids.configuration!
    const disconnectName = state === "play" ? "kick_disconnect" : "disconnect"

    it(`${state} Disconnect: Portal writes, minecraft-protocol reads, and back`, () => {
      const theirs = mcDecode(state, "clientbound", pv, table.clientbound.disconnect, encodeDisconnectBody(reason, pv))
      expect(theirs.name).toBe(disconnectName)
      expect(textOf(theirs.params.reason, pv)).toEqual(pv >= 765 ? reasonAsNbt : reason)
      const { id, body } = mcEncode(state, "clientbound", pv, disconnectName, { reason: mcText(reason, pv) })
      expect(id).toBe(table.clientbound.disconnect)
      expect(ok(decodeDisconnectBody(body, pv))).toEqual(pv >= 765 ? reasonAsNbt : reason)
    })

    for (const direction of ["clientbound", "serverbound"] as Array<Direction>) {
      it(`${state} ${direction} Keep Alive`, () => {
        const id = pv >= 340 ? -8_070_450_532_247_928_832n : 123_456_789n
        const theirs = mcDecode(state, direction, pv, table[direction].keepAlive, encodeKeepAliveBody(id, pv))
        expect(theirs.name).toBe("keep_alive")
        expect(pv >= 340 ? mcLong(theirs.params.keepAliveId) : theirs.params.keepAliveId).toBe(pv >= 340 ? id : Number(id))
        const { id: packetId, body } = mcEncode(state, direction, pv, "keep_alive", { keepAliveId: pv >= 340 ? id : Number(id) })
        expect(packetId).toBe(table[direction].keepAlive)
        expect(ok(decodeKeepAliveBody(body, pv))).toBe(id)
      })

      it(`${state} ${direction} Plugin Message`, () => {
        const message = { channel: pv >= 393 ? "bungeecord:main" : "BungeeCord", data: randomBytes(300) }
        const theirs = mcDecode(state, direction, pv, table[direction].pluginMessage, encodePluginMessageBody(message, pv))
        expect(theirs).toEqual({ name: "custom_payload", params: message })
        const { id, body } = mcEncode(state, direction, pv, "custom_payload", message)
        expect(id).toBe(table[direction].pluginMessage)
        expect(ok(decodePluginMessageBody(body, pv))).toEqual(message)
      })
    }
  }

  it("a system message and an action bar text to the player", () => {
    for (const actionBar of [false, true]) {
      const chat = encodeChatToPlayer(reason, pv, actionBar)
      const id = ids.play.clientbound[chat.packet]
      expect(id).toBeDefined()
      const theirs = mcDecode("play", "clientbound", pv, id!, chat.body)
      if (pv >= 759) {
        expect(theirs.name).toBe("system_chat")
        expect(textOf(theirs.params.content, pv)).toEqual(pv >= 765 ? reasonAsNbt : reason)
        if (pv === 759) expect(theirs.params.type).toBe(actionBar ? 2 : 1)
        else expect(theirs.params.isActionBar).toBe(actionBar)
      } else {
        expect(theirs.name).toBe("chat")
        expect(JSON.parse(theirs.params.message as string)).toEqual(reason)
        if (pv >= 47) expect(theirs.params.position).toBe(actionBar ? 2 : 1)
        if (pv >= 735) expect(theirs.params.sender).toBe(NIL_UUID)
      }
    }
  })

  if (pv >= 764) {
    it("Start Configuration, Acknowledge Configuration and Finish Configuration have empty bodies", () => {
      expect(mcDecode("play", "clientbound", pv, ids.play.clientbound.startConfiguration!, EMPTY_BODY).name).toBe("start_configuration")
      expect(mcDecode("play", "serverbound", pv, ids.play.serverbound.configurationAcknowledged!, EMPTY_BODY).name).toBe(
        "configuration_acknowledged"
      )
      expect(mcDecode("configuration", "clientbound", pv, ids.configuration!.clientbound.finishConfiguration, EMPTY_BODY).name).toBe(
        "finish_configuration"
      )
      expect(mcDecode("configuration", "serverbound", pv, ids.configuration!.serverbound.finishConfiguration, EMPTY_BODY).name).toBe(
        "finish_configuration"
      )
      expect(mcDecode("login", "serverbound", pv, ids.login.serverbound.loginAcknowledged!, EMPTY_BODY).name).toBe("login_acknowledged")
    })
  }

  if (pv >= 766) {
    it("Transfer, in configuration and play", () => {
      const body = encodeTransferBody("lobby.example.com", 25566)
      for (const [state, id] of [
        ["play", ids.play.clientbound.transfer!],
        ["configuration", ids.configuration!.clientbound.transfer!]
      ] as const) {
        expect(mcDecode(state, "clientbound", pv, id, body)).toEqual({ name: "transfer", params: { host: "lobby.example.com", port: 25566 } })
      }
    })
  }
})

describe("bad configuration and play packets are Invalid", () => {
  it("truncated or padded keep-alives, oversized plugin messages, broken text", () => {
    expect(decodeKeepAliveBody(Buffer.alloc(7), 769)._tag).toBe("Invalid")
    expect(decodeKeepAliveBody(Buffer.alloc(9), 769)._tag).toBe("Invalid")
    expect(decodeKeepAliveBody(Buffer.alloc(3), 5)._tag).toBe("Invalid")
    expect(decodeKeepAliveBody(Buffer.from([0x80]), 47)._tag).toBe("Invalid")
    const big = encodePluginMessageBody({ channel: "a:b", data: Buffer.alloc(40_000) }, 769)
    expect(decodePluginMessageBody(big, 769, 32_767)).toMatchObject({ _tag: "Invalid", reason: expect.stringMatching(/40000 bytes/) })
    expect(decodePluginMessageBody(big, 769)._tag).toBe("Ok")
    expect(decodePluginMessageBody(new PacketWriter().string("x".repeat(21)).body(), 340)._tag).toBe("Invalid")
    expect(decodePluginMessageBody(new PacketWriter().string("MC|Brand").i16(10).body(), 5)._tag).toBe("Invalid")
    expect(decodeDisconnectBody(Buffer.from([0x0a, 0x08]), 769)._tag).toBe("Invalid")
    expect(decodeDisconnectBody(Buffer.from([0x05, 0x61]), 47)._tag).toBe("Invalid")
  })
})
