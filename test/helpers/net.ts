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
