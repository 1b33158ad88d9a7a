/** What a banned player reads on the disconnect screen (pure). */
import type { Ban } from "./file.js"

const UNITS: ReadonlyArray<readonly [string, number]> = [
  ["d", 86_400],
  ["h", 3_600],
  ["m", 60],
  ["s", 1]
]

/** `2h 13m`, `3d 4h`, `42s`: the largest two units, the smaller left out when it is zero. */
export const formatRemaining = (seconds: number): string => {
  const total = Math.max(1, Math.ceil(seconds))
  const first = UNITS.findIndex(([, size]) => total >= size)
  const [unit, size] = UNITS[first]!
  const count = Math.floor(total / size)
  const parts = [`${count}${unit}`]
  const next = UNITS[first + 1]
  if (next !== undefined) {
    const rest = Math.floor((total - count * size) / next[1])
    if (rest > 0) parts.push(`${rest}${next[0]}`)
  }
  return parts.join(" ")
}

export const banMessage = (ban: Ban, nowSeconds: number): string => {
  const lines = ["§cYou are banned from this server."]
  if (ban.reason.trim() !== "") lines.push(`§7Reason: §f${ban.reason}`)
  lines.push(
    ban.expires_at === null ? "§7This ban is permanent." : `§7Expires in ${formatRemaining(ban.expires_at - nowSeconds)}.`
  )
  return lines.join("\n")
}
