// The package's install script: builds the splice addon of the zero_copy relay (binding.gyp, native/). It never fails
// the install, since zero_copy servers relay like passthrough without the addon; it prints one warning line instead.
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")

const skip = (why) => {
  console.warn(`portal: zero_copy addon not built (${why}); zero_copy servers will relay like passthrough`)
  process.exit(0)
}

/** The node-gyp bundled with npm when run by npm, else one on PATH, else through npx. */
const nodeGyp = () => {
  const bundled = process.env.npm_config_node_gyp
  if (bundled) return bundled.endsWith(".js") ? [process.execPath, bundled] : [bundled]
  const onPath = spawnSync("node-gyp", ["--version"], { stdio: "ignore" })
  return onPath.error === undefined && onPath.status === 0 ? ["node-gyp"] : ["npx", "--yes", "node-gyp"]
}

/** Headers installed next to the running node (distribution packages, official tarballs) spare node-gyp a download. */
const nodedirArgs = () => {
  if (process.env.npm_config_nodedir) return []
  const prefix = resolve(dirname(process.execPath), "..")
  return existsSync(join(prefix, "include", "node", "common.gypi")) ? [`--nodedir=${prefix}`] : []
}

/** The most telling line of a failed build: the first compiler or gyp error. */
const firstError = (output) =>
  output
    .split("\n")
    .find((line) => /\berror\b|gyp ERR!/i.test(line))
    ?.trim()
    .slice(0, 300) ?? "no error output"

if (process.platform !== "linux") skip(`splice(2) needs Linux, this is ${process.platform}`)

const [command, ...args] = nodeGyp()
const build = spawnSync(command, [...args, "rebuild", ...nodedirArgs()], {
  cwd: root,
  encoding: "utf8",
  maxBuffer: 64 * 1024 * 1024
})
if (build.error !== undefined) skip(`cannot run ${command}: ${build.error.message}`)
if (build.status !== 0) skip(`node-gyp failed: ${firstError(`${build.stderr}\n${build.stdout}`)}`)
