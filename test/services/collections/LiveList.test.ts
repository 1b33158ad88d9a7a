import { describe, expect, it } from "vitest"
import { LiveList } from "../../../src/services/collections/LiveList.js"

describe("LiveList", () => {
  it("keeps members in the order they came, removes any of them through its link, and reads the oldest", () => {
    const list = new LiveList<string>()
    const a = list.add("a")
    const b = list.add("b")
    const c = list.add("c")
    const d = list.add("d")
    expect(list.values()).toEqual(["a", "b", "c", "d"])
    list.remove(c)
    list.remove(c) // again: nothing
    expect(list.values()).toEqual(["a", "b", "d"])
    expect(list.size).toBe(3)
    expect(list.oldest()).toBe("a")
    expect(list.size).toBe(3)
    list.remove(a)
    list.remove(a) // again: nothing
    expect(list.values()).toEqual(["b", "d"])
    expect(list.oldest()).toBe("b")
    list.remove(b)
    expect(list.oldest()).toBe("d")
    list.remove(d)
    expect(list.oldest()).toBeUndefined()
    expect(list.size).toBe(0)
    list.add("e")
    expect(list.values()).toEqual(["e"])
  })

  it("lets go of a removed member and its neighbours: the link keeps nothing alive", () => {
    const list = new LiveList<{ readonly name: string }>()
    list.add({ name: "first" })
    const middle = list.add({ name: "middle" })
    list.add({ name: "last" })
    list.remove(middle)
    expect(middle).toEqual({ value: undefined, older: undefined, newer: undefined })
  })

  it("gives a copy of its members: removing them while going through it is safe", () => {
    const list = new LiveList<number>()
    const links = [1, 2, 3, 4].map((n) => list.add(n))
    const seen: Array<number> = []
    for (const n of list.values()) {
      seen.push(n)
      for (const link of links) list.remove(link)
    }
    expect(seen).toEqual([1, 2, 3, 4])
    expect(list.size).toBe(0)
  })
})
