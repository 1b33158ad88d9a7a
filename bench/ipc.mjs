// @ts-check
/**
 * Request and answer over a forked child's IPC channel: each request carries an id that the child's answer repeats,
 * so the orchestrator can await a backend or generator like a function call.
 */

/**
 * @typedef {{ id: number, cmd: string, [key: string]: unknown }} Request
 * @typedef {{ id: number, result?: unknown, error?: string }} Answer
 */

/**
 * The parent's side.
 * @param {import("node:child_process").ChildProcess} child
 * @param {string} name for error messages
 */
export const client = (child, name) => {
  let next = 0
  /** @type {Map<number, { resolve: (value: any) => void, reject: (error: Error) => void }>} */
  const pending = new Map()
  child.on("message", (/** @type {Answer} */ answer) => {
    const waiting = pending.get(answer.id)
    if (waiting === undefined) return
    pending.delete(answer.id)
    if (answer.error !== undefined) waiting.reject(new Error(`${name}: ${answer.error}`))
    else waiting.resolve(answer.result)
  })
  child.once("exit", (code, signal) => {
    for (const waiting of pending.values()) waiting.reject(new Error(`${name} exited (${code ?? signal})`))
    pending.clear()
  })
  return {
    /**
     * @param {string} cmd
     * @param {Record<string, unknown>} [args]
     * @returns {Promise<any>}
     */
    ask: (cmd, args = {}) =>
      new Promise((resolve, reject) => {
        const id = ++next
        pending.set(id, { resolve, reject })
        child.send({ ...args, id, cmd })
      })
  }
}

/**
 * The child's side: answers each request with its handler's result. The child exits when the parent goes away,
 * so an interrupted bench leaves no process behind.
 * @param {Record<string, (request: Request) => unknown>} handlers
 */
export const serve = (handlers) => {
  const send = /** @type {(message: Answer) => void} */ (process.send?.bind(process))
  process.on("message", async (/** @type {Request} */ request) => {
    try {
      const handler = handlers[request.cmd]
      if (handler === undefined) throw new Error(`unknown command ${request.cmd}`)
      send({ id: request.id, result: await handler(request) })
    } catch (error) {
      send({ id: request.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) })
    }
  })
  process.on("disconnect", () => process.exit(0))
}
