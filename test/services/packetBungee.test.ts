/**
 * The BungeeCord channel's logic with in-memory sessions: every subchannel's answer (as BungeeCord writes it),
 * what goes to other players, permissions, and what is dropped; with worker threads, lookups answered later (in the
 * order asked) and what this thread cannot deliver handed on, and deliveries other threads hand here. The wire side
 * runs against real peers in test/e2e/packetForwarding.test.ts.
 */
import { afterEach, describe, expect, it } from "vitest"
import { CHANNEL_DEFAULTS } from "../../src/schema/GlobalConfig.js"
import { type BungeePeer, deliverHere, handleBungeeRequest, liveSessions, MAX_WAITING_LOOKUPS } from "../../src/services/relay/packet/bungee.js"
import { localNetwork, lookupSessions, stillWanted } from "../../src/services/relay/packet/channelNetwork.js"
import type { ChannelContext, ChannelDelivery, ChannelNetwork, ChannelSession } from "../../src/services/relay/packet/PacketStart.js"

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
  readonly ended: Array<unknown>
}

const peer = (name: string, serverId: string, protocolVersion = 765, reachesBackend = true): FakePeer => {
  const sent: FakePeer["sent"] = []
  const chat: Array<unknown> = []
  const ended: Array<unknown> = []
  return {
    name,
    uuid: `00000000-0000-0000-0000-${name.padStart(12, "0").slice(-12).replace(/[^0-9a-f]/gi, "a")}`,
    serverId,
    clientIp: "203.0.113.7",
    clientPort: 50000,
    protocolVersion,
    reachesBackend,
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

const sessionsOf = (serverId?: string) => entries.filter((entry) => serverId === undefined || entry.serverId === serverId)

type Permissions = Partial<Record<keyof typeof CHANNEL_DEFAULTS, boolean>>

/** One thread's context by default: lookups answered at once from `entries`, nothing routed. */
const context = (permissions: Permissions = {}, network: ChannelNetwork = thisThread): ChannelContext => ({
  permissions: { ...CHANNEL_DEFAULTS, ...permissions },
  lookup: network.lookup,
  route: network.route,
  firstTime: network.firstTime,
  countFor: (serverId) => entries.filter((entry) => entry.serverId === serverId).length,
  servers: [
    { id: "lobby", host: "10.0.0.1", port: 25565 },
    { id: "games", host: "10.0.0.2", port: 25566 },
    { id: "named", host: "games.internal", port: 25567 },
    { id: "nowhere", host: "gone.internal", port: 25568 }
  ],
  resolve: (host, reply) => resolving.push({ host, reply })
})

/** Host names the channel asked to resolve; the test answers them. */
const resolving: Array<{ host: string; reply: (address: string | undefined, failure?: string) => void }> = []

const logs: Array<string> = []
const log = { debug: (line: string) => logs.push(`debug ${line}`), info: (line: string) => logs.push(`info ${line}`), warning: (line: string) => logs.push(`warn ${line}`) }

/** The one thread's network (what it has logged once is forgotten after each test). */
let thisThread = localNetwork(sessionsOf)
const added: Array<BungeePeer> = []
afterEach(() => {
  thisThread = localNetwork(sessionsOf)
  for (const one of added.splice(0)) liveSessions.remove(one)
  logs.length = 0
  resolving.length = 0
})
const live = (one: FakePeer) => {
  liveSessions.add(one)
  added.push(one)
  return one
}

const ask = (asker: FakePeer, data: Buffer, permissions?: Permissions, network?: ChannelNetwork) =>
  handleBungeeRequest(asker, "bungeecord:main", data, context(permissions, network), log)

/** A worker's network: lookups wait until the test answers them (as the main thread would), deliveries are kept. */
const workerNetwork = () => {
  const lookups: Array<{ query: unknown; reply: (sessions: ReadonlyArray<ChannelSession>, failure?: string) => void }> = []
  const routed: Array<ChannelDelivery> = []
  const network: ChannelNetwork = {
    lookup: (query, reply) => lookups.push({ query, reply }),
    route: (delivery) => routed.push(delivery),
    firstTime: localNetwork(sessionsOf).firstTime
  }
  return { network, lookups, routed }
}

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
    expect(fields(servers!.data)).toEqual(["GetServers", "lobby, games, named, nowhere"])
    expect(fields(server!.data)).toEqual(["GetServer", "lobby"])
    expect(fields(playerServer!.data)).toEqual(["GetPlayerServer", "Carol", "games"])
    expect(fields(noPlayerServer!.data)).toEqual(["GetPlayerServer", "nobody", ""])
    expect(fields(uuidOther!.data)).toEqual(["UUIDOther", "Bob", "22222222222222222222222222222222"])
    expect(fields(serverIp!.data, 2)).toEqual(["ServerIP", "games", "10.0.0.2", 25566])
  })

  it("ServerIP resolves a host name, in the order asked, and answers nothing for one that does not resolve", () => {
    const alice = peer("Alice", "lobby")
    ask(alice, request("ServerIP", "named"))
    ask(alice, request("ServerIP", "lobby"))
    ask(alice, request("ServerIP", "nowhere"))
    ask(alice, request("ServerIP", "unknown"))
    // The literal address waits behind the name being resolved.
    expect(alice.sent).toEqual([])
    expect(resolving.map((entry) => entry.host)).toEqual(["games.internal", "gone.internal"])
    resolving[0]!.reply("10.0.0.3")
    resolving[1]!.reply(undefined, "ENOTFOUND")
    expect(alice.sent.map((message) => fields(message.data, 2))).toEqual([
      ["ServerIP", "named", "10.0.0.3", 25567],
      ["ServerIP", "lobby", "10.0.0.1", 25565]
    ])
    expect(logs).toContain("debug BungeeCord ServerIP not answered: gone.internal does not resolve (ENOTFOUND)")
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

  it("answers lookups that come later (from the main thread) in the order asked, and a failed one as if nobody were online", () => {
    const { network, lookups } = workerNetwork()
    const alice = peer("Alice", "lobby")
    ask(alice, request("PlayerList", "ALL"), {}, network)
    ask(alice, request("GetServers"), {}, network)
    ask(alice, request("GetPlayerServer", "Carol"), {}, network)
    ask(alice, request("IPOther", "Carol"), {}, network)
    ask(alice, request("PlayerList", "unknown"), {}, network)
    expect(lookups.map((lookup) => lookup.query)).toEqual([
      { _tag: "On", serverId: undefined },
      { _tag: "Named", name: "Carol" },
      { _tag: "Named", name: "Carol" }
    ])
    // GetServers is known at once, but waits for the PlayerList before it.
    expect(alice.sent).toEqual([])
    lookups[2]!.reply([], "the worker is stopping")
    lookups[1]!.reply(lookupSessions(sessionsOf, { _tag: "Named", name: "carol" }))
    expect(alice.sent).toEqual([])
    lookups[0]!.reply(lookupSessions(sessionsOf, { _tag: "On", serverId: undefined }))
    expect(alice.sent.map((message) => fields(message.data)[0])).toEqual(["PlayerList", "GetServers", "GetPlayerServer"])
    expect(fields(alice.sent[0]!.data)).toEqual(["PlayerList", "ALL", "Alice, Bob, Carol"])
    expect(fields(alice.sent[2]!.data)).toEqual(["GetPlayerServer", "Carol", "games"])
    // The failed IPOther: no answer (as for a player who is not online), and a debug line.
    expect(logs).toEqual(["debug BungeeCord IPOther answered as if nobody were online: the worker is stopping"])
    // Nothing waits now: an answer known at once goes at once.
    ask(alice, request("GetServer"), {}, network)
    expect(fields(alice.sent[3]!.data)).toEqual(["GetServer", "lobby"])
  })

  it(`keeps at most ${MAX_WAITING_LOOKUPS} lookups of one connection waiting`, () => {
    const { network, lookups } = workerNetwork()
    const alice = peer("Alice", "lobby")
    for (let i = 0; i <= MAX_WAITING_LOOKUPS; i++) ask(alice, request("UUIDOther", `p${i}`), {}, network)
    expect(lookups).toHaveLength(MAX_WAITING_LOOKUPS)
    expect(logs).toEqual([`debug BungeeCord UUIDOther dropped: ${MAX_WAITING_LOOKUPS} lookups of this connection are waiting for their answers`])
    for (const lookup of lookups) lookup.reply([])
    ask(alice, request("UUIDOther", "Bob"), {}, network)
    expect(lookups).toHaveLength(MAX_WAITING_LOOKUPS + 1)
  })

  it("with workers, delivers to this thread's players first and hands on only what is left", () => {
    const { network, routed } = workerNetwork()
    const alice = live(peer("Alice", "lobby"))
    const carol = live(peer("Carol", "games"))
    const payload = Buffer.concat([utf("my:channel"), Buffer.from([0, 1, 9])])
    // Carol is here: her server is reached here, the other servers are left to other threads.
    ask(alice, request("Forward", "ALL", "my:channel", Buffer.from([0, 1, 9])), {}, network)
    expect(carol.sent.map((message) => message.data)).toEqual([payload])
    expect(routed.splice(0)).toEqual([{ _tag: "Forward", server: undefined, skip: ["lobby", "games"], data: payload }])
    // A named server with a player here: nothing is left.
    ask(alice, request("Forward", "games", "my:channel", Buffer.from([0, 1, 9])), {}, network)
    expect(routed).toEqual([])
    ask(alice, request("Forward", "elsewhere", "my:channel", Buffer.from([0, 1, 9])), {}, network)
    ask(alice, request("ForwardToPlayer", "Dave", "my:channel", Buffer.from([0, 1, 9])), {}, network)
    ask(alice, request("ForwardToPlayer", "carol", "my:channel", Buffer.from([0, 1, 9])), {}, network)
    ask(alice, request("Message", "Dave", "hi"), { Message: true }, network)
    ask(alice, request("Message", "ALL", "all"), { Message: true }, network)
    ask(alice, request("KickPlayerRaw", "Dave", '{"text":"go"}'), { KickPlayerRaw: true }, network)
    ask(alice, request("KickPlayer", "Carol", "bye"), { KickPlayer: true }, network)
    expect(routed).toEqual([
      { _tag: "Forward", server: "elsewhere", skip: [], data: payload },
      { _tag: "ForwardToPlayer", player: "Dave", data: payload },
      { _tag: "Message", player: "Dave", message: "hi" },
      { _tag: "Message", player: undefined, message: "all" },
      { _tag: "Kick", player: "Dave", reason: { text: "", extra: [{ text: "go" }] } }
    ])
    expect(carol.sent).toHaveLength(3)
    expect(alice.chat).toEqual(["all"])
    expect(carol.chat).toEqual(["all"])
    expect(carol.ended).toEqual(["bye"])
  })

  it("delivers what another thread hands here to this thread's players, and says whose servers it reached", () => {
    const bob = live(peer("Bob", "lobby", 340))
    const carol = live(peer("Carol", "games"))
    const data = new Uint8Array([0, 1, 0, 0, 7])
    expect(deliverHere({ _tag: "Forward", server: undefined, skip: ["games"], data })).toEqual(["lobby"])
    expect(bob.sent).toEqual([{ channel: "BungeeCord", data: Buffer.from(data) }])
    expect(deliverHere({ _tag: "Forward", server: "games", skip: ["games"], data })).toEqual([])
    expect(deliverHere({ _tag: "Forward", server: "games", skip: [], data })).toEqual(["games"])
    expect(carol.sent).toEqual([{ channel: "bungeecord:main", data: Buffer.from(data) }])
    expect(deliverHere({ _tag: "ForwardToPlayer", player: "nobody", data })).toEqual([])
    expect(deliverHere({ _tag: "ForwardToPlayer", player: "BOB", data })).toEqual(["lobby"])
    expect(deliverHere({ _tag: "Message", player: undefined, message: "everyone" })).toEqual(["lobby", "games"])
    expect(deliverHere({ _tag: "Message", player: "carol", message: "you" })).toEqual(["games"])
    expect(carol.chat).toEqual(["everyone", "you"])
    expect(deliverHere({ _tag: "Kick", player: "Bob", reason: "out" })).toEqual(["lobby"])
    expect(bob.ended).toEqual(["out"])
  })

  it("forwards through a session of the server that is in play, not one still logging in or reconfigured", () => {
    const dora = live(peer("Dora", "arena", 767, false))
    const erin = live(peer("Erin", "arena", 767))
    const data = new Uint8Array([0, 1, 0, 0, 8])
    expect(deliverHere({ _tag: "Forward", server: "arena", skip: [], data })).toEqual(["arena"])
    expect(deliverHere({ _tag: "Forward", server: undefined, skip: ["lobby", "games"], data })).toEqual(["arena"])
    expect(dora.sent).toEqual([])
    expect(erin.sent).toHaveLength(2)
    // A named player who cannot be reached now is not reported as reached (another thread may hold a newer session).
    expect(deliverHere({ _tag: "ForwardToPlayer", player: "dora", data })).toEqual([])
    const fay = live(peer("Fay", "quiet", 767, false))
    expect(deliverHere({ _tag: "Forward", server: "quiet", skip: [], data })).toEqual([])
    expect(fay.sent).toEqual([])
  })
})

describe("the channel's lookups and what is left of a delivery", () => {
  it("looks players up by name in any case (the first listed), and lists a server's or everyone's sessions as plain data", () => {
    expect(lookupSessions(sessionsOf, { _tag: "Named", name: "BOB" })).toEqual([
      { serverId: "lobby", clientAddress: "203.0.113.8", clientPort: 50001, name: "Bob", uuid: "22222222-2222-2222-2222-222222222222" }
    ])
    expect(lookupSessions(sessionsOf, { _tag: "Named", name: "nobody" })).toEqual([])
    const withExtra = () => [{ ...entries[2]!, id: 7, since: 1 }]
    expect(lookupSessions(withExtra, { _tag: "On", serverId: undefined })).toEqual([entries[2]])
    expect(lookupSessions(sessionsOf, { _tag: "On", serverId: "lobby" }).map((entry) => entry.name)).toEqual(["Alice", "Bob"])
  })

  it("leaves nothing once a named target was reached, and a Forward to all without the servers reached", () => {
    const data = new Uint8Array([1])
    const toAll: ChannelDelivery = { _tag: "Forward", server: undefined, skip: ["lobby"], data }
    expect(stillWanted(toAll, [])).toBe(toAll)
    expect(stillWanted(toAll, ["games", "lobby", "games"])).toEqual({ ...toAll, skip: ["lobby", "games"] })
    expect(stillWanted({ _tag: "Forward", server: "games", skip: [], data }, ["games"])).toBeUndefined()
    expect(stillWanted({ _tag: "Forward", server: "games", skip: [], data }, [])).toEqual({ _tag: "Forward", server: "games", skip: [], data })
    expect(stillWanted({ _tag: "ForwardToPlayer", player: "x", data }, ["games"])).toBeUndefined()
    expect(stillWanted({ _tag: "Kick", player: "x", reason: "r" }, [])).toEqual({ _tag: "Kick", player: "x", reason: "r" })
    expect(stillWanted({ _tag: "Message", player: "x", message: "m" }, ["games"])).toBeUndefined()
    expect(stillWanted({ _tag: "Message", player: undefined, message: "m" }, ["games"])).toEqual({ _tag: "Message", player: undefined, message: "m" })
  })
})
