/** A release that runs its body the first time it is called and does nothing after: leases are given back once. */
export const releaseOnce = (release: () => void): (() => void) => {
  let released = false
  return () => {
    if (released) return
    released = true
    release()
  }
}
