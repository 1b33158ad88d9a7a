/** The BungeeCord plugin channel, with requests written and answers read by a Java DataOutput/DataInput written here. */
import { describe, expect, it } from "vitest"
import {
  BUNGEE_SUBCHANNELS,
  bungeeChannelFor,
  type BungeeEncoded,
  decodeBungeeRequest,
  encodeBungeeAnswer,
  encodeBungeeForwarded,
  isBungeeChannel
} from "../../src/protocol/bungeeChannel.js"

/** java.io.DataOutputStream for ASCII text (the subchannels and names below); other text is given as raw bytes. */
const dataOutput = (...fields: Array<string | { short: number } | { int: number } | Buffer>) =>
  Buffer.concat(
    fields.map((field) => {
      if (typeof field === "string") {
        const bytes = Buffer.from(field, "latin1")
        const out = Buffer.alloc(2 + bytes.length)
        out.writeUInt16BE(bytes.length)
        bytes.copy(out, 2)
        return out
      }
      if (Buffer.isBuffer(field)) return field
      if ("short" in field) {
        const out = Buffer.alloc(2)
        out.writeInt16BE(field.short)
        return out
      }
      const out = Buffer.alloc(4)
      out.writeInt32BE(field.int)
      return out
    })
  )

/** java.io.DataInputStream over an answer. */
const dataInput = (encoded: BungeeEncoded) => {
  if (encoded._tag === "Invalid") throw new Error(encoded.reason)
  const data = encoded.data
  let at = 0
  return {
    utf: () => {
      const length = data.readUInt16BE(at)
      const text = data.toString("utf8", at + 2, at + 2 + length)
      at += 2 + length
      return text
    },
    int: () => {
      at += 4
      return data.readInt32BE(at - 4)
    },
    unsignedShort: () => {
      at += 2
      return data.readUInt16BE(at - 2)
    },
    bytes: (length: number) => {
      at += length
      return data.subarray(at - length, at)
    },
    done: () => at === data.length
  }
}

const decoded = (data: Buffer) => {
  const read = decodeBungeeRequest(data)
  if (read._tag === "Invalid") throw new Error(read.reason)
  return read.request
}

describe("BungeeCord channel requests", () => {
  it("reads every subchannel as BungeeCord's DownstreamBridge does", () => {
    const payload = Buffer.from([1, 2, 3, 0xff])
    expect(decoded(dataOutput("Forward", "ALL", "MyChannel", { short: 4 }, payload))).toEqual({
      _tag: "Forward",
      target: "ALL",
      channel: "MyChannel",
      data: payload
    })
    expect(decoded(dataOutput("ForwardToPlayer", "Notch", "MyChannel", { short: 4 }, payload))).toEqual({
      _tag: "ForwardToPlayer",
      player: "Notch",
      channel: "MyChannel",
      data: payload
    })
    expect(decoded(dataOutput("Connect", "lobby"))).toEqual({ _tag: "Connect", server: "lobby" })
    expect(decoded(dataOutput("ConnectOther", "Notch", "lobby"))).toEqual({ _tag: "ConnectOther", player: "Notch", server: "lobby" })
    expect(decoded(dataOutput("IP"))).toEqual({ _tag: "IP" })
    expect(decoded(dataOutput("IPOther", "Notch"))).toEqual({ _tag: "IPOther", player: "Notch" })
    expect(decoded(dataOutput("PlayerCount", "ALL"))).toEqual({ _tag: "PlayerCount", server: "ALL" })
    expect(decoded(dataOutput("PlayerList", "lobby"))).toEqual({ _tag: "PlayerList", server: "lobby" })
    expect(decoded(dataOutput("GetServers"))).toEqual({ _tag: "GetServers" })
    expect(decoded(dataOutput("GetServer"))).toEqual({ _tag: "GetServer" })
    expect(decoded(dataOutput("GetPlayerServer", "Notch"))).toEqual({ _tag: "GetPlayerServer", player: "Notch" })
    expect(decoded(dataOutput("UUID"))).toEqual({ _tag: "UUID" })
    expect(decoded(dataOutput("UUIDOther", "Notch"))).toEqual({ _tag: "UUIDOther", player: "Notch" })
    expect(decoded(dataOutput("ServerIP", "lobby"))).toEqual({ _tag: "ServerIP", server: "lobby" })
    // writeUTF("§Hello"): § is C2 A7 in (modified) UTF-8.
    expect(decoded(dataOutput("Message", "ALL", Buffer.from("0007c2a748656c6c6f", "hex")))).toEqual({
      _tag: "Message",
      target: "ALL",
      message: "§Hello"
    })
    expect(decoded(dataOutput("MessageRaw", "Notch", '{"text":"hi"}'))).toEqual({ _tag: "MessageRaw", target: "Notch", json: '{"text":"hi"}' })
    expect(decoded(dataOutput("KickPlayer", "Notch", "Bye"))).toEqual({ _tag: "KickPlayer", player: "Notch", reason: "Bye" })
    expect(decoded(dataOutput("KickPlayerRaw", "Notch", '{"text":"Bye"}'))).toEqual({ _tag: "KickPlayerRaw", player: "Notch", json: '{"text":"Bye"}' })
    expect(decoded(dataOutput("SomethingElse", "x"))).toEqual({ _tag: "Unknown", subchannel: "SomethingElse" })
    expect(BUNGEE_SUBCHANNELS).toHaveLength(18)
  })

  it("reads modified UTF-8 as Java writes it (NUL as C0 80, emoji as surrogates)", () => {
    expect(decoded(Buffer.concat([dataOutput("Message", "ALL"), Buffer.from("000961c080eda0bdedb880", "hex")]))).toEqual({
      _tag: "Message",
      target: "ALL",
      message: "a\u0000😀"
    })
  })

  it("refuses cut requests, negative Forward lengths and malformed text, as values", () => {
    const forward = dataOutput("Forward", "ALL", "MyChannel", { short: 4 }, Buffer.from([1, 2, 3, 4]))
    for (let cut = 0; cut < forward.length; cut++) expect(decodeBungeeRequest(forward.subarray(0, cut))._tag).toBe("Invalid")
    expect(decodeBungeeRequest(dataOutput("Forward", "ALL", "c", { short: -1 }))).toMatchObject({ _tag: "Invalid", reason: expect.stringMatching(/negative/) })
    expect(decodeBungeeRequest(Buffer.from("0001ff", "hex"))._tag).toBe("Invalid")
    expect(decodeBungeeRequest(dataOutput("Connect"))._tag).toBe("Invalid")
  })
})

describe("BungeeCord channel answers", () => {
  it("are written as BungeeCord writes them", () => {
    let input = dataInput(encodeBungeeAnswer({ _tag: "IP", ip: "203.0.113.7", port: 51234 }))
    expect([input.utf(), input.utf(), input.int(), input.done()]).toEqual(["IP", "203.0.113.7", 51234, true])
    input = dataInput(encodeBungeeAnswer({ _tag: "IPOther", player: "Notch", ip: "203.0.113.8", port: 1 }))
    expect([input.utf(), input.utf(), input.utf(), input.int(), input.done()]).toEqual(["IPOther", "Notch", "203.0.113.8", 1, true])
    input = dataInput(encodeBungeeAnswer({ _tag: "PlayerCount", server: "ALL", count: 42 }))
    expect([input.utf(), input.utf(), input.int(), input.done()]).toEqual(["PlayerCount", "ALL", 42, true])
    input = dataInput(encodeBungeeAnswer({ _tag: "PlayerList", server: "lobby", players: ["Notch", "jeb_"] }))
    expect([input.utf(), input.utf(), input.utf(), input.done()]).toEqual(["PlayerList", "lobby", "Notch, jeb_", true])
    input = dataInput(encodeBungeeAnswer({ _tag: "GetServers", servers: ["lobby", "survival"] }))
    expect([input.utf(), input.utf(), input.done()]).toEqual(["GetServers", "lobby, survival", true])
    input = dataInput(encodeBungeeAnswer({ _tag: "GetServer", server: "lobby" }))
    expect([input.utf(), input.utf(), input.done()]).toEqual(["GetServer", "lobby", true])
    input = dataInput(encodeBungeeAnswer({ _tag: "GetPlayerServer", player: "Notch", server: "" }))
    expect([input.utf(), input.utf(), input.utf(), input.done()]).toEqual(["GetPlayerServer", "Notch", "", true])
    input = dataInput(encodeBungeeAnswer({ _tag: "UUID", uuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5" }))
    expect([input.utf(), input.utf(), input.done()]).toEqual(["UUID", "069a79f444e94726a5befca90e38aaf5", true])
    input = dataInput(encodeBungeeAnswer({ _tag: "UUIDOther", player: "Notch", uuid: "069a79f4-44e9-4726-a5be-fca90e38aaf5" }))
    expect([input.utf(), input.utf(), input.utf(), input.done()]).toEqual(["UUIDOther", "Notch", "069a79f444e94726a5befca90e38aaf5", true])
    input = dataInput(encodeBungeeAnswer({ _tag: "ServerIP", server: "lobby", ip: "10.0.0.2", port: 40000 }))
    expect([input.utf(), input.utf(), input.utf(), input.unsignedShort(), input.done()]).toEqual(["ServerIP", "lobby", "10.0.0.2", 40000, true])
  })

  it("the Forward payload delivered to the other backends", () => {
    const data = Buffer.from([9, 8, 7])
    const input = dataInput(encodeBungeeForwarded("MyChannel", data))
    expect([input.utf(), input.unsignedShort(), input.bytes(3), input.done()]).toEqual(["MyChannel", 3, data, true])
    expect(encodeBungeeForwarded("MyChannel", Buffer.alloc(40_000))._tag).toBe("Invalid")
  })

  it("refuses an answer Java could not write (a string over 65535 bytes)", () => {
    const players = Array.from({ length: 6000 }, (_, i) => `Player_${i}_xx`)
    expect(encodeBungeeAnswer({ _tag: "PlayerList", server: "ALL", players })._tag).toBe("Invalid")
  })

  it("uses the channel name of the backend's version", () => {
    expect(bungeeChannelFor(340)).toBe("BungeeCord")
    expect(bungeeChannelFor(393)).toBe("bungeecord:main")
    expect(isBungeeChannel("BungeeCord")).toBe(true)
    expect(isBungeeChannel("bungeecord:main")).toBe(true)
    expect(isBungeeChannel("minecraft:brand")).toBe(false)
  })
})
