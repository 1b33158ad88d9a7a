/**
 * The handshakes this thread has in progress, oldest first, so that when every place the proxy has for handshakes
 * in progress is taken, the oldest of them gives way to a newcomer instead of the newcomer being refused.
 *
 * Why: a flood from many addresses (each within its own bound) that opens connections and stalls would otherwise
 * hold all the places until their handshake timeout, and refuse every real client meanwhile. A real client sends
 * its handshake within a round trip, so it is never the oldest for long; a stalled connection is.
 *
 * A doubly linked list: adding, removing and taking the oldest are O(1) and allocate one small entry per
 * connection, with no hash table to grow and shrink at connection rate.
 */

interface Entry {
  older: Entry | undefined
  newer: Entry | undefined
  /** Gives the place back and closes the connection; undefined once the entry left the queue. */
  evict: (() => void) | undefined
}

export class HandshakeQueue {
  private oldest: Entry | undefined
  private newest: Entry | undefined
  private count = 0

  /** Adds a handshake; `evict` gives its place back and closes it, should it have to give way. */
  add(evict: () => void): Entry {
    const entry: Entry = { older: this.newest, newer: undefined, evict }
    if (this.newest === undefined) this.oldest = entry
    else this.newest.newer = entry
    this.newest = entry
    this.count++
    return entry
  }

  /** Takes a handshake out (it ended, or moved on); again is a no-op. */
  remove(entry: Entry): void {
    if (entry.evict === undefined) return
    entry.evict = undefined
    if (entry.older === undefined) this.oldest = entry.newer
    else entry.older.newer = entry.newer
    if (entry.newer === undefined) this.newest = entry.older
    else entry.newer.older = entry.older
    entry.older = entry.newer = undefined
    this.count--
  }

  /** Evicts the oldest handshake; false when there is none. */
  evictOldest(): boolean {
    const entry = this.oldest
    if (entry === undefined) return false
    const evict = entry.evict!
    this.remove(entry)
    evict()
    return true
  }

  get size(): number {
    return this.count
  }
}
