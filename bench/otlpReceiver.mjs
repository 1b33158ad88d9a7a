// @ts-check
/**
 * The OTLP receiver of the telemetry row, a forked child: an OTLP/gRPC endpoint (the trace and metrics services'
 * Export methods) and an OTLP/HTTP one (`/v1/traces`, `/v1/metrics`), each taking every request and answering an
 * empty success, as a collector would, without decoding: the row measures what telemetry costs Portal, not the
 * receiver. It counts requests, bytes and its own CPU.
 */
import * as grpc from "@grpc/grpc-js"
import { createServer } from "node:http"
import { serve } from "./ipc.mjs"

const METHODS = [
  "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
  "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
]
const EMPTY = Buffer.alloc(0)
let requests = 0
let bytes = 0

const server = new grpc.Server()
for (const method of METHODS) {
  server.register(
    method,
    (/** @type {grpc.ServerUnaryCall<Buffer, Buffer>} */ call, /** @type {grpc.sendUnaryData<Buffer>} */ callback) => {
      requests += 1
      bytes += call.request.length
      callback(null, EMPTY)
    },
    (/** @type {Buffer} */ response) => response,
    (/** @type {Buffer} */ request) => request,
    "unary"
  )
}

const http = createServer((request, response) => {
  request.on("data", (chunk) => (bytes += chunk.length))
  request.on("end", () => {
    requests += 1
    response.writeHead(200, { "content-type": "application/x-protobuf" }).end()
  })
})

serve({
  listenHttp: () =>
    new Promise((resolve) => http.listen(0, "127.0.0.1", () => resolve(/** @type {import("node:net").AddressInfo} */ (http.address()).port))),
  listen: () =>
    new Promise((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port)))
    ),
  snapshot: () => {
    const cpu = process.cpuUsage()
    return { requests, bytes, cpuSeconds: (cpu.user + cpu.system) / 1e6 }
  }
})
