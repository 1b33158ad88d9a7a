// A worker thread that relays one loopback connection with the splice addon of its own environment, for the tests of
// the addon's per-environment relay. workerData: { addon: path of portal_splice.node, mode }.
//   "complete": 1 MiB echoed through the relay, then the client ends; posts { done: result }. The worker then has
//               nothing left and must exit by itself.
//   "throw":    as "complete", but onDone throws; posts { uncaught: message } from the uncaughtException handler.
//   "abandon":  the backend streams without end; posts { started: true } and waits to be terminated.
import { createRequire } from "node:module"
import { connect, createServer } from "node:net"
import { once } from "node:events"
import { parentPort, workerData } from "node:worker_threads"

const native = createRequire(import.meta.url)(workerData.addon)
const mode = workerData.mode
const post = (message) => parentPort.postMessage(message)

const listen = async (server) => {
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  return server.address().port
}

const backendServer = createServer((socket) => {
  socket.on("error", () => {})
  if (mode === "abandon") {
    const chunk = Buffer.alloc(64 * 1024, 1)
    const pump = () => {
      while (socket.write(chunk));
    }
    socket.on("drain", pump)
    pump()
  } else socket.pipe(socket)
})
const backendPort = await listen(backendServer)

// Node must not read the proxy's sockets: paused before they could start.
const proxyServer = createServer({ pauseOnConnect: true }, async (fromClient) => {
  const toBackend = connect(backendPort, "127.0.0.1").pause()
  await once(toBackend, "connect")
  native.start(fromClient._handle.fd, toBackend._handle.fd, (result) => {
    fromClient.destroy()
    toBackend.destroy()
    if (mode === "throw") throw new Error("onDone threw")
    post({ done: result })
    backendServer.close()
    proxyServer.close()
  })
  if (mode === "abandon") post({ started: true })
})
const proxyPort = await listen(proxyServer)

if (mode === "throw") {
  process.on("uncaughtException", (error) => {
    post({ uncaught: error.message })
    backendServer.close()
    proxyServer.close()
  })
}

const client = connect(proxyPort, "127.0.0.1")
client.on("error", () => {})
await once(client, "connect")
if (mode === "abandon") client.resume()
else {
  const message = Buffer.alloc(1024 * 1024, 7)
  let received = 0
  client.on("data", (data) => {
    received += data.length
    if (received === message.length) client.end()
  })
  client.write(message)
}
