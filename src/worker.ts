/** A worker thread of Portal's data plane (worker_threads > 1): started by the main thread's WorkerPool. */
import { parentPort, workerData } from "node:worker_threads"
import { runWorker } from "./layers/Worker.js"
import type { WorkerData } from "./services/workers/messages.js"

if (parentPort === null) {
  process.stderr.write("portal: dist/worker.js runs as a worker thread of Portal, not on its own\n")
  process.exit(2)
}
// The main thread's own description of this worker (messages.ts), handed over by the Worker constructor.
runWorker(workerData as WorkerData, parentPort)
