import * as net from "node:net"

/** A loopback port nothing listens on right now (asked of the OS, then released). */
export const freePort = async (host = "127.0.0.1"): Promise<number> => {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, host, resolve))
  const port = (server.address() as net.AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
