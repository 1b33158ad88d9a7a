/** Who is at the other end: from the socket, or from a PROXY header without asking the socket. */
import type { Socket } from "node:net"
import { describe, expect, it } from "vitest"
import { readProxyHeader } from "../../../src/protocol/proxyProtocol.js"
import { peerOn, socketPeer } from "../../../src/services/session/connection.js"
import { proxyPeer } from "../../../src/services/session/opening.js"

/** A socket that counts the address lookups (each a system call on a real one). */
const countingSocket = () => {
  const asked: Array<string> = []
  const answers = { remoteAddress: "::ffff:127.0.0.5", remotePort: 40001, localAddress: "127.0.0.1", localPort: 25565 }
  const socket = {}
  for (const [name, answer] of Object.entries(answers)) {
    Object.defineProperty(socket, name, {
      get() {
        asked.push(name)
        return answer
      }
    })
  }
  return { socket: socket as Socket, asked }
}

const header = (text: string) => {
  const read = readProxyHeader(Buffer.from(text))
  if (read._tag !== "Header") throw new Error(`not a header: ${read._tag}`)
  return read
}

describe("peers", () => {
  it("socketPeer reads the remote side at once and the local side only when asked", () => {
    const { socket, asked } = countingSocket()
    const peer = socketPeer(socket)
    expect([peer.clientIp, peer.clientPort]).toEqual(["127.0.0.5", 40001])
    expect(asked).toEqual(["remoteAddress", "remotePort"])
    expect([peer.localIp, peer.localPort]).toEqual(["127.0.0.1", 25565])
    expect(asked).toEqual(["remoteAddress", "remotePort", "localAddress", "localPort"])
  })

  it("peerOn takes the client as given", () => {
    const { socket, asked } = countingSocket()
    const peer = peerOn(socket, "203.0.113.9", 5)
    expect([peer.clientIp, peer.clientPort]).toEqual(["203.0.113.9", 5])
    expect(asked).toEqual([])
    expect(peer.localPort).toBe(25565)
    expect(asked).toEqual(["localPort"])
  })

  it("a PROXY header names both ends without a lookup on the socket", () => {
    const { socket, asked } = countingSocket()
    const peer = proxyPeer({ id: 1, socket }, header("PROXY TCP4 203.0.113.7 10.0.0.1 51234 25566\r\n"))
    expect({ ...peer }).toEqual({ clientIp: "203.0.113.7", clientPort: 51234, localIp: "10.0.0.1", localPort: 25566 })
    expect(asked).toEqual([])
  })

  it("a mapped IPv6 source is normalised; a LOCAL header is the socket's own peer", () => {
    const { socket, asked } = countingSocket()
    expect(proxyPeer({ id: 1, socket }, header("PROXY TCP6 ::ffff:198.51.100.2 ::1 7 8\r\n")).clientIp).toBe("198.51.100.2")
    expect(asked).toEqual([])
    expect(proxyPeer({ id: 2, socket }, header("PROXY UNKNOWN\r\n")).clientIp).toBe("127.0.0.5")
  })

  it("any spelling of an IPv6 source or destination is the one form Node reports", () => {
    const { socket } = countingSocket()
    const spelled = (source: string, destination = "::1") => {
      const peer = proxyPeer({ id: 1, socket }, header(`PROXY TCP6 ${source} ${destination} 7 8\r\n`))
      return [peer.clientIp, peer.localIp]
    }
    expect(spelled("::FFFF:198.51.100.2")).toEqual(["198.51.100.2", "::1"])
    expect(spelled("0:0:0:0:0:ffff:c633:6402", "0:0:0:0:0:0:0:1")).toEqual(["198.51.100.2", "::1"])
    expect(spelled("2001:DB8:0:0::1", "2001:db8:0::FF")).toEqual(["2001:db8::1", "2001:db8::ff"])
  })
})
