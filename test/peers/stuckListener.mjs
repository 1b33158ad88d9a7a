// A listener whose process stops accepting: once its accept queue (backlog 1) holds two connections, further
// connects get no answer at all (the kernel drops their SYNs), as from a backend that hangs. Prints "ready <port>".
import * as net from "node:net"

const holdMs = Number(process.argv[2] ?? 20_000)
const server = net.createServer(() => {})
server.listen({ port: 0, host: "127.0.0.1", backlog: 1 }, () => {
  console.log(`ready ${server.address().port}`)
  // Blocks the event loop, so nothing more is accepted; the process ends by itself afterwards.
  setTimeout(() => {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, holdMs)
    process.exit(0)
  }, 50)
})
