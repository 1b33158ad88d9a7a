/**
 * LiveList: members in the order they were added, each removed in O(1) through the link `add` returned, and let go
 * of the moment it is removed.
 *
 * Why not a Set: V8 replaces a Set's or Map's table when it grows or shrinks, and the replaced table keeps its entries
 * (and a pointer to the new one) until a full collection. Once such a table sits in the old generation, every member
 * it held (a connection, with its sockets and state) counts as live in each young-generation collection and is copied
 * and then promoted: at connection rate that filled the old generation with dead connections and made full
 * collections several times more frequent. A removed link here is emptied: it keeps nothing alive but itself.
 */
export interface Link<T extends NonNullable<unknown>> {
  value: T | undefined
  older: Link<T> | undefined
  newer: Link<T> | undefined
}

export class LiveList<T extends NonNullable<unknown>> {
  private first: Link<T> | undefined
  private newest: Link<T> | undefined
  private count = 0

  /** Adds a member as the newest; the link removes it. */
  add(value: T): Link<T> {
    const link: Link<T> = { value, older: this.newest, newer: undefined }
    if (this.newest === undefined) this.first = link
    else this.newest.newer = link
    this.newest = link
    this.count++
    return link
  }

  /** Removes a member; a link removed already is left as it is. */
  remove(link: Link<T>): void {
    if (link.value === undefined) return
    link.value = undefined
    if (link.older === undefined) this.first = link.newer
    else link.older.newer = link.newer
    if (link.newer === undefined) this.newest = link.older
    else link.newer.older = link.older
    link.older = link.newer = undefined
    this.count--
  }

  /** The oldest member, left in the list; undefined when there is none. */
  oldest(): T | undefined {
    return this.first?.value
  }

  /** The members, oldest first (a copy: removing members while going through it is safe). */
  values(): Array<T> {
    const values: Array<T> = []
    for (let link = this.first; link !== undefined; link = link.newer) values.push(link.value!)
    return values
  }

  get size(): number {
    return this.count
  }
}
