/** Bounded polling for conditions that settle asynchronously (file watches, sockets). */
export const waitFor = async <A>(
  probe: () => A | undefined | Promise<A | undefined>,
  { timeoutMs = 5_000, intervalMs = 25, what = "condition" }: { timeoutMs?: number; intervalMs?: number; what?: string } = {}
): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined && value !== false) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}
