import { TraceEncoder } from "./dist/services/telemetry/otlpTraces.js"
import { newTrace } from "./dist/services/telemetry/connectionTrace.js"
const enc = new TraceEncoder({ attributes: { "service.name": "proxy", "service.version": "0.1.0", "host.name": "vm", "service.instance.id": "abc" }, scope: { name: "portal", version: "0.1.0" } })
const mk = (i) => {
  const t = newTrace(i, 0, performance.now())
  Object.assign(t, { end: t.start + 50, outcome: "relayed", clientAddress: "127.0.0.1", clientPort: 40000 + (i % 1000), handshakeEnd: t.start + 1, handshake: "login", protocolVersion: 769, domain: "bench.example.com", domainPort: 25565, server: "bench", proxyMode: "passthrough", admissionStart: t.start + 1, admissionEnd: t.start + 2, admission: "admitted", player: "rate" + i, attempts: [{ address: "127.0.0.1:25566", start: t.start + 2, end: t.start + 3, error: undefined }], forwardingStart: t.start + 3, forwardingEnd: t.start + 3.1, forwarding: "none", sessionStart: t.start + 4, sessionEnd: t.start + 50, bytesIn: 100, bytesOut: 2000, closedBy: "client_closed" })
  return t
}
const N = 20000
const recs = Array.from({ length: N }, (_, i) => mk(i))
for (let r = 0; r < 4; r++) {
  const c0 = process.cpuUsage(); let bytes = 0
  for (let k = 0; k < N; k += 512) bytes += enc.encode(recs.slice(k, k + 512)).length
  const c = process.cpuUsage(c0)
  console.log("encode", ((c.user + c.system) / N).toFixed(2), "µs/login", (bytes / N).toFixed(0), "bytes/login")
}
const c0 = process.cpuUsage(); for (let i = 0; i < N; i++) mk(i); const c = process.cpuUsage(c0); console.log("record", ((c.user + c.system) / N).toFixed(2))
