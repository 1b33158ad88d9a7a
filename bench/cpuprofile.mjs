// @ts-check
/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`): self time per function and per origin (Portal's own code,
 * each npm package, Node internals), and inclusive time per Portal function, highest first, as shares of the time
 * the process ran.
 *
 *   node bench/cpuprofile.mjs PROFILE.cpuprofile [TOP]
 */
import { readFileSync } from "node:fs"

/**
 * @typedef {{ id: number, callFrame: { functionName: string, url: string, lineNumber: number }, children?: Array<number> }} ProfileNode
 * @typedef {{ nodes: Array<ProfileNode>, samples: Array<number>, timeDeltas: Array<number> }} Profile
 */

/** Where a function comes from: a package name, "portal", "node" or the pseudo-frames V8 adds. @param {string} url */
const originOf = (url) => {
  if (url === "") return "(v8: gc, program)"
  if (url.startsWith("node:")) return "node internals"
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg !== null) return /** @type {string} */ (pkg[1])
  if (url.includes("/dist/")) return "portal"
  return url
}

/** @param {Profile} profile */
const summarise = (profile) => {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  /** @type {Map<string, number>} */
  const functions = new Map()
  /** @type {Map<string, number>} */
  const origins = new Map()
  /** @type {Map<string, number>} */
  const portalInclusive = new Map()
  /** @type {Map<number, number>} */
  const parentOf = new Map()
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id)
  /** @param {ProfileNode} node */
  const label = (node) => {
    const { functionName, url, lineNumber } = node.callFrame
    const where = url === "" ? "" : ` ${url.replace(/^.*node_modules\//, "").replace(/^.*\/dist\//, "dist/")}:${lineNumber + 1}`
    return `${functionName || "(anonymous)"}${where}`
  }
  let total = 0
  profile.samples.forEach((id, i) => {
    const node = byId.get(id)
    const micros = profile.timeDeltas[i] ?? 0
    // Idle is time the process waited for events: left out, so that shares are of the time it ran.
    if (node === undefined || node.callFrame.functionName === "(idle)") return
    const name = label(node)
    functions.set(name, (functions.get(name) ?? 0) + micros)
    const origin = originOf(node.callFrame.url)
    // Each Portal function on the stack, once: the time spent in it and in everything it called.
    const seen = new Set()
    for (let at = /** @type {ProfileNode | undefined} */ (node); at !== undefined; at = byId.get(parentOf.get(at.id) ?? -1)) {
      if (originOf(at.callFrame.url) !== "portal") continue
      const frame = label(at)
      if (seen.has(frame)) continue
      seen.add(frame)
      portalInclusive.set(frame, (portalInclusive.get(frame) ?? 0) + micros)
    }
    origins.set(origin, (origins.get(origin) ?? 0) + micros)
    total += micros
  })
  const rank = (/** @type {Map<string, number>} */ map, /** @type {number} */ top) =>
    [...map].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, micros]) => ({ name, ms: micros / 1000, share: micros / total }))
  return {
    totalMs: total / 1000,
    functions: (/** @type {number} */ top) => rank(functions, top),
    portal: (/** @type {number} */ top) => rank(portalInclusive, top),
    origins: rank(origins, 20)
  }
}

const file = process.argv[2]
if (file === undefined) throw new Error("usage: node bench/cpuprofile.mjs PROFILE.cpuprofile [TOP]")
const summary = summarise(JSON.parse(readFileSync(file, "utf8")))
const line = (/** @type {{ name: string, ms: number, share: number }} */ row) =>
  `${(row.share * 100).toFixed(1).padStart(5)}%  ${row.ms.toFixed(0).padStart(7)} ms  ${row.name}`
console.log(`${summary.totalMs.toFixed(0)} ms of CPU time (idle left out); shares are of that\n\nby origin:`)
for (const row of summary.origins) console.log(line(row))
console.log("\nby function (self time):")
for (const row of summary.functions(Number(process.argv[3] ?? 30))) console.log(line(row))
console.log("\nPortal functions, inclusive (the time on the stack under each; the runtime's own loop is not under any):")
for (const row of summary.portal(Number(process.argv[3] ?? 30))) console.log(line(row))
