/**
 * The BungeeCord channel's logic with in-memory sessions: every subchannel's answer (as BungeeCord writes it),
 * what goes to other players, permissions, and what is dropped. The wire side runs against real peers in
 * test/e2e/packetForwarding.test.ts.
 */
import { afterEach, describe, expect, it } from "vitest"
import { CHANNEL_DEFAULTS } from "../../src/schema/GlobalConfig.js"
import { type BungeePeer, handleBungeeRequest, liveSessions } from "../../src/services/relay/packet/bungee.js"
import type { ChannelContext, ChannelSession } from "../../src/services/relay/packet/PacketStart.js"

const utf = (text: string) => {
  const bytes = Buffer.from(text, "utf8")
  const length = Buffer.alloc(2)
  length.writeUInt16BE(bytes.length)
  return Buffer.concat([length, bytes])
}
const request = (...fields: Array<string | Buffer>) => Buffer.concat(fields.map((field) => (typeof field === "string" ? utf(field) : field)))

/** The UTF fields of an answer, and any 4-byte int or 2-byte short after them (`tail`). */
const fields = (data: Buffer, tail: 0 | 2 | 4 = 0) => {
  const out: Array<string | number> = []
  let at = 0
  while (at < data.length - tail) {
    const length = data.readUInt16BE(at)
    out.push(data.toString("utf8", at + 2, at + 2 + length))
    at += 2 + length
  }
  if (tail === 4) out.push(data.readInt32BE(at))
  if (tail === 2) out.push(data.readUInt16BE(at))
  return out
}

interface FakePeer extends BungeePeer {
  readonly sent: Array<{ channel: string; data: Buffer }>
  readonly chat: Array<unknown>
  readonly ended: Array<string>
}

const peer = (name: string, serverId: string, protocolVersion = 765): FakePeer => {
  const sent: FakePeer["sent"] = []
  const chat: Array<unknown> = []
  const ended: Array<string> = []
  return {
    name,
    uuid: `00000000-0000-0000-0000-${name.padStart(12, "0").slice(-12).replace(/[^0-9a-f]/gi, "a")}`,
    serverId,
    clientIp: "203.0.113.7",
    clientPort: 50000,
    protocolVersion,
    sent,
    chat,
    ended,
    sendToBackend: (channel, data) => sent.push({ channel, data }),
    sendChat: (message) => chat.push(message),
    end: (reason) => ended.push(reason)
  }
}

const entries: Array<ChannelSession> = [
  { serverId: "lobby", clientAddress: "203.0.113.7", clientPort: 50000, name: "Alice", uuid: "11111111-1111-1111-1111-111111111111" },
  { serverId: "lobby", clientAddress: "203.0.113.8", clientPort: 50001, name: "Bob", uuid: "22222222-2222-2222-2222-222222222222" },
  { serverId: "games", clientAddress: "198.51.100.1", clientPort: 40000, name: "Carol", uuid: "33333333-3333-3333-3333-333333333333" }
]

const context = (permissions: Partial<Record<keyof typeof CHANNEL_DEFAULTS, boolean>> = {}): ChannelContext => ({
  permissions: { ...CHANNEL_DEFAULTS, ...permissions },
  sessions: (serverId) => entries.filter((entry) => serverId === undefined || entry.serverId === serverId),
  countFor: (serverId) => entries.filter((entry) => entry.serverId === serverId).length,
  servers: [
    { id: "lobby", host: "10.0.0.1", port: 25565 },
    { id: "games", host: "10.0.0.2", port: 25566 }
  ]
})

const logs: Array<string> = []
const log = { debug: (line: string) => logs.push(`debug ${line}`), info: (line: string) => logs.push(`info ${line}`), warning: (line: string) => logs.push(`warn ${line}`) }

const added: Array<BungeePeer> = []
afterEach(() => {
  for (const one of added.splice(0)) liveSessions.remove(one)
  logs.length = 0
})
const live = (one: FakePeer) => {
  liveSessions.add(one)
  added.push(one)
  return one
}

const ask = (asker: FakePeer, data: Buffer, permissions?: Partial<Record<keyof typeof CHANNEL_DEFAULTS, boolean>>) =>
  handleBungeeRequest(asker, "bungeecord:main", data, context(permissions), log)

describe("the BungeeCord channel", () => {
  it("answers each lookup as BungeeCord does", () => {
    const alice = peer("Alice", "lobby")
    ask(alice, request("IP"))
    ask(alice, request("IPOther", "carol"))
    ask(alice, request("IPOther", "nobody"))
    ask(alice, request("PlayerCount", "ALL"))
    ask(alice, request("PlayerCount", "lobby"))
    ask(alice, request("PlayerCount", "unknown"))
    ask(alice, request("PlayerList", "lobby"))
    ask(alice, request("GetServers"))
    ask(alice, request("GetServer"))
    ask(alice, request("GetPlayerServer", "Carol"))
    ask(alice, request("GetPlayerServer", "nobody"))
    ask(alice, request("UUIDOther", "Bob"))
    ask(alice, request("ServerIP", "games"))
    const [ip, ipOther, countAll, countLobby, list, servers, server, playerServer, noPlayerServer, uuidOther, serverIp] = alice.sent
    expect(alice.sent.every((message) => message.channel === "bungeecord:main")).toBe(true)
    expect(alice.sent).toHaveLength(11)
    expect(fields(ip!.data, 4)).toEqual(["IP", "203.0.113.7", 50000])
    expect(fields(ipOther!.data, 4)).toEqual(["IPOther", "Carol", "198.51.100.1", 40000])
    expect(fields(countAll!.data, 4)).toEqual(["PlayerCount", "ALL", 3])
    expect(fields(countLobby!.data, 4)).toEqual(["PlayerCount", "lobby", 2])
    expect(fields(list!.data)).toEqual(["PlayerList", "lobby", "Alice, Bob"])
    expect(fields(servers!.data)).toEqual(["GetServers", "lobby, games"])
    expect(fields(server!.data)).toEqual(["GetServer", "lobby"])
    expect(fields(playerServer!.data)).toEqual(["GetPlayerServer", "Carol", "games"])
    expect(fields(noPlayerServer!.data)).toEqual(["GetPlayerServer", "nobody", ""])
    expect(fields(uuidOther!.data)).toEqual(["UUIDOther", "Bob", "22222222222222222222222222222222"])
    expect(fields(serverIp!.data, 2)).toEqual(["ServerIP", "games", "10.0.0.2", 25566])
  })

  it("forwards to other servers' players in their version's channel, messages and kicks players, and logs Connect once", () => {
    const alice = live(peer("Alice", "lobby"))
    const carol = live(peer("Carol", "games", 340))
    ask(alice, request("Forward", "ALL", "my:channel", Buffer.from([0, 2, 1, 2])))
    expect(alice.sent).toEqual([])
    expect(carol.sent).toHaveLength(1)
    expect(carol.sent[0]!.channel).toBe("BungeeCord")
    expect(carol.sent[0]!.data).toEqual(Buffer.concat([utf("my:channel"), Buffer.from([0, 2, 1, 2])]))
    ask(carol, request("ForwardToPlayer", "alice", "x:y", Buffer.from([0, 0])))
    expect(alice.sent.map((message) => message.channel)).toEqual(["bungeecord:main"])
    ask(alice, request("Message", "Carol", "§ahello"), { Message: true })
    ask(alice, request("MessageRaw", "ALL", '{"text":"raw"}'), { MessageRaw: true })
    expect(carol.chat).toEqual(["§ahello", { text: "", extra: [{ text: "raw" }] }])
    ask(alice, request("KickPlayer", "carol", "bye"), { KickPlayer: true })
    expect(carol.ended).toEqual(["bye"])
    ask(alice, request("Connect", "games"))
    ask(alice, request("Connect", "games"))
    expect(logs.filter((line) => line.includes("Connect"))).toHaveLength(1)
  })

  it("drops what is not permitted (with a debug line), unknown subchannels and cut-short requests", () => {
    const alice = live(peer("Alice", "lobby"))
    const carol = live(peer("Carol", "games"))
    ask(alice, request("Message", "Carol", "not by default"))
    ask(alice, request("KickPlayer", "Carol", "not by default"))
    ask(alice, request("UUID"), { UUID: false })
    ask(alice, request("SomethingElse"))
    ask(alice, request("Forward", "games", "cut"))
    expect(alice.sent).toEqual([])
    expect(carol.chat).toEqual([])
    expect(carol.ended).toEqual([])
    expect(logs).toEqual([
      "debug BungeeCord subchannel Message is not permitted ([forwarding.channel_permissions]): dropped",
      "debug BungeeCord subchannel KickPlayer is not permitted ([forwarding.channel_permissions]): dropped",
      "debug BungeeCord subchannel UUID is not permitted ([forwarding.channel_permissions]): dropped",
      'debug BungeeCord subchannel "SomethingElse" is unknown: dropped',
      "debug BungeeCord request dropped: BungeeCord request cut short"
    ])
  })
})
