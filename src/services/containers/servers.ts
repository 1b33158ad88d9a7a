/**
 * One container as one server: what the Engine API says of a container (a list entry or an inspection) reduced to
 * what discovery needs, its address, its id, and its labels decoded by the server-file schema with the same decode
 * function as a file. Problems name the container (name and short id) and the label.
 */
import * as Effect from "effect/Effect"
import { checkServerValue, type ServerDefinition } from "../../schema/decode.js"
import { formatHostPort } from "../../schema/HostPort.js"
import type { ConfigProblem } from "../../schema/problems.js"
import { DEFAULT_BACKEND_PORT, SERVER_NAME_PATTERN } from "../../schema/ServerConfig.js"
import { resolveServerCheck } from "../config/load.js"
import type { ContainerInspect, ContainerSummary } from "./engine.js"
import { ENABLE_LABEL, labelProblem, labelsToTable, PORT_LABEL } from "./labels.js"

const LABEL_ADDRESSES = "portal.addresses"

/** What discovery reads of a container, from either answer of the API. */
export interface ContainerInfo {
  readonly id: string
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  /** Running and not paused. */
  readonly running: boolean
  /** Creation time in milliseconds: the older of two clashing containers keeps its server. */
  readonly created: number
  /** Networks by name with the container's address on each (empty when it has none there). */
  readonly networks: ReadonlyArray<{ readonly name: string; readonly ip: string }>
  /** Published ports: container port -> host address. */
  readonly published: ReadonlyArray<{ readonly containerPort: number; readonly hostIp: string; readonly hostPort: number }>
  /** `network_mode: host`: the container's ports are the host's. */
  readonly hostNetwork: boolean
}

const byName = <A extends { readonly name: string }>(a: A, b: A) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

const networksOf = (networks: Readonly<Record<string, { readonly IPAddress?: string | null | undefined; readonly GlobalIPv6Address?: string | null | undefined }>> | null | undefined) =>
  Object.entries(networks ?? {})
    .map(([name, network]) => ({ name, ip: network.IPAddress || network.GlobalIPv6Address || "" }))
    .sort(byName)

/** Docker names carry a leading slash. */
const bareName = (name: string) => name.replace(/^\//, "")

export const fromSummary = (summary: ContainerSummary): ContainerInfo => ({
  id: summary.Id,
  name: bareName(summary.Names?.[0] ?? summary.Id.slice(0, 12)),
  labels: summary.Labels ?? {},
  running: summary.State === undefined || summary.State === null || summary.State === "running",
  created: (summary.Created ?? 0) * 1000,
  networks: networksOf(summary.NetworkSettings?.Networks),
  published: (summary.Ports ?? []).flatMap((port) =>
    port.Type === "tcp" && port.PublicPort !== undefined && port.PublicPort !== null
      ? [{ containerPort: port.PrivatePort, hostIp: port.IP ?? "", hostPort: port.PublicPort }]
      : []
  ),
  hostNetwork: summary.HostConfig?.NetworkMode === "host"
})

export const fromInspect = (inspect: ContainerInspect): ContainerInfo => {
  const created = inspect.Created === undefined || inspect.Created === null ? 0 : Date.parse(inspect.Created)
  return {
    id: inspect.Id,
    name: bareName(inspect.Name),
    labels: inspect.Config?.Labels ?? {},
    running: inspect.State.Running && inspect.State.Paused !== true,
    // Whole seconds, as a list entry gives it, so that both answers order two containers the same way.
    created: Number.isFinite(created) ? Math.floor(created / 1000) * 1000 : 0,
    networks: networksOf(inspect.NetworkSettings?.Networks),
    published: Object.entries(inspect.NetworkSettings?.Ports ?? {}).flatMap(([key, bindings]) => {
      const match = /^(\d+)\/tcp$/.exec(key)
      if (match === null || bindings === null) return []
      return bindings.flatMap((binding) => {
        const hostPort = Number(binding.HostPort)
        return Number.isInteger(hostPort) && hostPort > 0 ? [{ containerPort: Number(match[1]), hostIp: binding.HostIp ?? "", hostPort }] : []
      })
    }),
    hostNetwork: inspect.HostConfig?.NetworkMode === "host"
  }
}

/** Whether a container asks to be a server. */
export const isEnabled = (info: ContainerInfo): boolean => info.labels[ENABLE_LABEL] === "true"

export const shortId = (id: string): string => id.slice(0, 12)

/** How messages name a container: `container mc-lobby (3f2a9c1b7e4d)`. */
export const containerLabel = (info: Pick<ContainerInfo, "id" | "name">): string => `container ${info.name} (${shortId(info.id)})`

/**
 * The server id a container gets when `portal.name` (and `portal.id`) are not set: its name in lower case, every
 * run of characters outside `[a-z0-9_-]` made one `-`, without `-` at either end (`My.Lobby_1` -> `my-lobby_1`);
 * `container-<short id>` when nothing is left.
 */
export const containerServerId = (info: Pick<ContainerInfo, "id" | "name">): string => {
  const id = info.name
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/^-+|-+$/g, "")
  return id.length > 0 && SERVER_NAME_PATTERN.test(id) ? id : `container-${shortId(info.id)}`
}

const ANY_V4 = new Set(["", "0.0.0.0"])
const ANY_V6 = new Set(["::", "[::]"])

/**
 * The address of a container when `portal.addresses` is not given, and how it was found: its IP on `network` when
 * set, else on any network it has (in name order), the host's loopback with host networking, else a host port
 * published for `port`.
 */
export const containerAddress = (
  info: ContainerInfo,
  port: number,
  network: string | undefined
): { readonly address: string; readonly how: string } | undefined => {
  const preferred = network === undefined ? undefined : info.networks.find((entry) => entry.name === network && entry.ip.length > 0)
  const any = preferred ?? info.networks.find((entry) => entry.ip.length > 0)
  if (any !== undefined) return { address: formatHostPort({ host: any.ip, port }), how: `its address on network ${any.name}` }
  if (info.hostNetwork) return { address: formatHostPort({ host: "127.0.0.1", port }), how: "host networking" }
  const published = info.published.filter((entry) => entry.containerPort === port)
  // Docker lists a port bound to every address twice (0.0.0.0 and ::); the IPv4 one is reached through 127.0.0.1.
  const chosen = published.find((entry) => ANY_V4.has(entry.hostIp)) ?? published.find((entry) => !ANY_V6.has(entry.hostIp)) ?? published[0]
  if (chosen === undefined) return undefined
  const host = ANY_V4.has(chosen.hostIp) ? "127.0.0.1" : ANY_V6.has(chosen.hostIp) ? "::1" : chosen.hostIp
  return { address: formatHostPort({ host, port: chosen.hostPort }), how: `host port ${chosen.hostPort} published for ${port}` }
}

export type ContainerServer =
  | { readonly _tag: "Server"; readonly definition: ServerDefinition; readonly how: string }
  | { readonly _tag: "Skipped"; readonly problems: ReadonlyArray<ConfigProblem> }

export interface DiscoverySettings {
  /** `[containers].network` */
  readonly network: string | undefined
  /** Where relative paths in labels (favicon files, a local server manager's working_dir) resolve: proxy.toml's directory. */
  readonly baseDir: string
}

/** A container's labels decoded as a server file; every problem of every label together. */
export const serverFromContainer = (info: ContainerInfo, settings: DiscoverySettings) =>
  Effect.gen(function* () {
    const file = containerLabel(info)
    const table = labelsToTable(info.labels)
    const problems: Array<ConfigProblem> = table.problems.map(({ label, message }) => ({ file, path: `label ${label}`, message }))
    const portText = info.labels[PORT_LABEL]
    const port = portText === undefined ? DEFAULT_BACKEND_PORT : /^\d{1,5}$/.test(portText.trim()) ? Number(portText.trim()) : NaN
    if (!(port >= 1 && port <= 65535)) {
      problems.push({ file, path: `label ${PORT_LABEL}`, message: `expected a port number 1..65535, got ${JSON.stringify(portText)}` })
    }
    const raw = { ...table.raw }
    let how = "portal.addresses"
    if (!("addresses" in raw) && problems.length === 0) {
      const found = containerAddress(info, port, settings.network)
      if (found === undefined) {
        problems.push({
          file,
          path: "",
          message:
            `has no address: it is on no network with an IP and publishes no host port for ${port}; ` +
            `set ${LABEL_ADDRESSES} (or ${PORT_LABEL} to the port the server listens on)`
        })
      } else {
        raw["addresses"] = [found.address]
        how = found.how
      }
    }
    const checked = yield* resolveServerCheck(
      checkServerValue(file, containerServerId(info), raw, { _tag: "Container", name: info.name, id: info.id }),
      file,
      settings.baseDir
    )
    // Without an address of its own, "addresses is required" says nothing the problem above did not.
    const decoding = checked.problems
      .filter((problem) => "addresses" in raw || problem.path !== "addresses")
      .map((problem) => labelProblem(table, problem))
    problems.push(...decoding)
    if (problems.length > 0 || checked.definition === undefined) {
      const skipped: ContainerServer = { _tag: "Skipped", problems }
      return skipped
    }
    const server: ContainerServer = { _tag: "Server", definition: checked.definition, how }
    return server
  })
