import * as fs from "node:fs"
import * as net from "node:net"

// The kernel takes source ports of outgoing connections, and ports for listen(0), from its ephemeral range. A port
// picked below it cannot be taken by another suite's traffic between freePort() and the moment a peer binds it.
const ephemeralLow = (): number => {
  try {
    const low = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0])
    return Number.isInteger(low) && low > 11_000 ? low : 32_768
  } catch {
    return 32_768
  }
}

const canListen = (port: number, host: string): Promise<boolean> =>
  new Promise((resolve) => {
    const server = net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, host, () => server.close(() => resolve(true)))
  })

/** A loopback port nothing listens on right now, outside the range the kernel hands out by itself. */
export const freePort = async (host = "127.0.0.1"): Promise<number> => {
  const low = 10_000
  const high = ephemeralLow()
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low))
    if (await canListen(port, host)) return port
  }
  throw new Error(`no free port found between ${low} and ${high}`)
}

export interface TcpSocket {
  readonly fd: number
  /** "established", "listen", or the kernel's state number in hex for the others. */
  readonly state: string
  readonly localPort: number
  readonly remotePort: number
}

const tcpPort = (address: string): number => parseInt(address.slice(address.lastIndexOf(":") + 1), 16)
const tcpStates: Record<string, string> = { "01": "established", "0A": "listen" }

/** This process's TCP sockets (Linux: /proc/self/net/tcp and tcp6, matched to /proc/self/fd). */
export const ownTcpSockets = (): Array<TcpSocket> => {
  const byInode = new Map<string, Omit<TcpSocket, "fd">>()
  for (const table of ["/proc/self/net/tcp", "/proc/self/net/tcp6"]) {
    const text = fs.existsSync(table) ? fs.readFileSync(table, "utf8") : ""
    for (const line of text.trim().split("\n").slice(1)) {
      // Fields: slot, local address, remote address, state, ..., the socket's inode (the tenth).
      const fields = line.trim().split(/\s+/)
      if (fields.length < 10) continue
      const state = tcpStates[fields[3]!] ?? fields[3]!
      byInode.set(fields[9]!, { state, localPort: tcpPort(fields[1]!), remotePort: tcpPort(fields[2]!) })
    }
  }
  const found: Array<TcpSocket> = []
  for (const name of fs.readdirSync("/proc/self/fd")) {
    let link: string
    try {
      link = fs.readlinkSync(`/proc/self/fd/${name}`)
    } catch {
      continue // closed since the listing
    }
    const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1]
    const socket = inode === undefined ? undefined : byInode.get(inode)
    if (socket !== undefined) found.push({ fd: Number(name), ...socket })
  }
  return found
}

/** A connected pair of loopback sockets: what was written to `near` is read at `far`, and back. The caller destroys them. */
export const socketPair = async (): Promise<{ near: net.Socket; far: net.Socket }> => {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const accepted = new Promise<net.Socket>((resolve) => server.once("connection", resolve))
  const near = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1")
  const far = await accepted
  await new Promise((resolve) => (near.connecting ? near.once("connect", resolve) : resolve(undefined)))
  server.close()
  for (const socket of [near, far]) socket.on("error", () => {})
  return { near, far }
}
