/**
 * A fake Docker Engine API: a real node:http server on a unix socket in a temporary directory (or on 127.0.0.1),
 * answering as the Engine API documents: `GET /version`, `GET /containers/json` with `filters` (label, status),
 * `GET /containers/{id}/json` (404 with `{"message"}` when there is no such container) and `GET /events`, a chunked
 * stream of one JSON object per line. Tests run, stop, rename... containers, which changes what it lists and emits
 * the events Docker emits; they can also change a container silently (no event) or take the whole API away.
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo, Socket } from "node:net"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterEach } from "vitest"

export interface ContainerSpec {
  readonly name: string
  readonly labels?: Record<string, string>
  /** Network name -> the container's IPv4 address on it. */
  readonly networks?: Record<string, string>
  /** Published ports: container port -> host port (bound to 0.0.0.0 and ::, as Docker lists them). */
  readonly ports?: ReadonlyArray<{ readonly containerPort: number; readonly hostPort: number; readonly hostIp?: string }>
  readonly networkMode?: string
  readonly image?: string
}

export interface FakeContainer {
  readonly id: string
  name: string
  labels: Record<string, string>
  state: "running" | "paused" | "exited"
  readonly created: number
  networks: Record<string, string>
  ports: ReadonlyArray<{ readonly containerPort: number; readonly hostPort: number; readonly hostIp?: string }>
  readonly networkMode: string
  readonly image: string
}

export interface FakeDocker {
  /** `unix:///…/docker.sock` or `tcp://127.0.0.1:<port>` */
  readonly endpoint: string
  readonly requests: Array<{ readonly method: string; readonly path: string }>
  readonly containers: Map<string, FakeContainer>
  /** While set, every request but `/events` gets this error answer (`{"message": ...}`). */
  failing: { readonly status: number; readonly message: string } | undefined
  /** Creates and starts a container (events `create`, `start` unless `silent`). */
  run(spec: ContainerSpec, options?: { readonly silent?: boolean }): FakeContainer
  start(id: string): void
  /** `docker stop`: events `kill`, `die`, `stop`. */
  stop(id: string): void
  /** The process ends on its own: event `die`. */
  die(id: string): void
  pause(id: string): void
  unpause(id: string): void
  rename(id: string, name: string): void
  /** `docker rm`: event `destroy`. */
  destroy(id: string): void
  /** Sends a raw line on every open event stream. */
  emitRaw(line: string): void
  /** Open `/events` streams. */
  streams(): number
  /** Stops answering: the socket goes away and every open connection is cut. */
  down(): Promise<void>
  up(): Promise<void>
  close(): Promise<void>
}

const running: Array<FakeDocker> = []
afterEach(async () => {
  for (const docker of running.splice(0)) await docker.close()
})

const API_VERSION = "1.47"

/** Filters as the Engine API takes them: `{"label":["a=b"]}`, or the older `{"label":{"a=b":true}}`. */
const parseFilters = (url: URL): Record<string, Array<string>> => {
  const text = url.searchParams.get("filters")
  if (text === null) return {}
  const json = JSON.parse(text) as Record<string, Array<string> | Record<string, boolean>>
  return Object.fromEntries(Object.entries(json).map(([key, value]) => [key, Array.isArray(value) ? value : Object.keys(value)]))
}

const matchesLabels = (labels: Record<string, string>, wanted: ReadonlyArray<string> | undefined) =>
  (wanted ?? []).every((filter) => {
    const eq = filter.indexOf("=")
    return eq < 0 ? filter in labels : labels[filter.slice(0, eq)] === filter.slice(eq + 1)
  })

const networkJson = (ip: string, index: number) => ({
  IPAMConfig: null,
  Links: null,
  Aliases: null,
  MacAddress: `02:42:ac:11:00:0${index}`,
  NetworkID: randomBytes(32).toString("hex"),
  EndpointID: randomBytes(32).toString("hex"),
  Gateway: ip.length > 0 ? "172.17.0.1" : "",
  IPAddress: ip,
  IPPrefixLen: ip.length > 0 ? 16 : 0,
  IPv6Gateway: "",
  GlobalIPv6Address: "",
  GlobalIPv6PrefixLen: 0,
  DriverOpts: null
})

const networksJson = (container: FakeContainer) =>
  Object.fromEntries(Object.entries(container.networks).map(([name, ip], index) => [name, networkJson(ip, index)]))

const summaryJson = (container: FakeContainer) => ({
  Id: container.id,
  Names: [`/${container.name}`],
  Image: container.image,
  ImageID: `sha256:${"0".repeat(64)}`,
  Command: "/start",
  Created: container.created,
  Ports: container.ports.flatMap((port) =>
    port.hostIp !== undefined
      ? [{ IP: port.hostIp, PrivatePort: port.containerPort, PublicPort: port.hostPort, Type: "tcp" }]
      : [
          { IP: "0.0.0.0", PrivatePort: port.containerPort, PublicPort: port.hostPort, Type: "tcp" },
          { IP: "::", PrivatePort: port.containerPort, PublicPort: port.hostPort, Type: "tcp" }
        ]
  ),
  Labels: container.labels,
  State: container.state,
  Status: container.state === "running" ? "Up 2 minutes" : container.state === "paused" ? "Up 2 minutes (Paused)" : "Exited (0) 1 second ago",
  HostConfig: { NetworkMode: container.networkMode },
  NetworkSettings: { Networks: networksJson(container) },
  Mounts: []
})

const inspectJson = (container: FakeContainer) => ({
  Id: container.id,
  Created: new Date(container.created * 1000).toISOString(),
  Path: "/start",
  Args: [],
  State: {
    Status: container.state,
    Running: container.state !== "exited",
    Paused: container.state === "paused",
    Restarting: false,
    OOMKilled: false,
    Dead: false,
    Pid: container.state === "exited" ? 0 : 4242,
    ExitCode: 0,
    Error: "",
    StartedAt: new Date(container.created * 1000).toISOString(),
    FinishedAt: "0001-01-01T00:00:00Z"
  },
  Image: `sha256:${"0".repeat(64)}`,
  Name: `/${container.name}`,
  RestartCount: 0,
  HostConfig: {
    NetworkMode: container.networkMode,
    PortBindings: Object.fromEntries(container.ports.map((port) => [`${port.containerPort}/tcp`, [{ HostIp: "", HostPort: String(port.hostPort) }]]))
  },
  Config: { Hostname: container.id.slice(0, 12), Image: container.image, Labels: container.labels, Env: [], Cmd: null },
  NetworkSettings: {
    Bridge: "",
    SandboxID: randomBytes(32).toString("hex"),
    Ports: Object.fromEntries(
      container.ports.map((port) => [
        `${port.containerPort}/tcp`,
        container.state === "exited"
          ? null
          : port.hostIp !== undefined
            ? [{ HostIp: port.hostIp, HostPort: String(port.hostPort) }]
            : [
                { HostIp: "0.0.0.0", HostPort: String(port.hostPort) },
                { HostIp: "::", HostPort: String(port.hostPort) }
              ]
      ])
    ),
    Networks: networksJson(container)
  }
})

const sendJson = (response: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  response.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    "api-version": API_VERSION,
    server: "Docker/27.3.1 (linux)"
  })
  response.end(text)
}

export const startFakeDocker = async (options: { readonly tcp?: boolean } = {}): Promise<FakeDocker> => {
  const dir = mkdtempSync(path.join(tmpdir(), "portal-docker-"))
  const socketPath = path.join(dir, "docker.sock")
  const containers = new Map<string, FakeContainer>()
  const requests: Array<{ readonly method: string; readonly path: string }> = []
  const streams = new Set<{ readonly response: ServerResponse; readonly filters: Record<string, Array<string>> }>()
  const sockets = new Set<Socket>()
  let server: Server | undefined
  let port = 0

  const find = (ref: string) =>
    containers.get(ref) ?? [...containers.values()].find((c) => c.name === ref || (ref.length >= 4 && c.id.startsWith(ref)))

  const emit = (container: FakeContainer, action: string, extra: Record<string, string> = {}) => {
    const now = Date.now()
    const event = {
      status: action,
      id: container.id,
      from: container.image,
      Type: "container",
      Action: action,
      Actor: { ID: container.id, Attributes: { ...container.labels, image: container.image, name: container.name, ...extra } },
      scope: "local",
      time: Math.floor(now / 1000),
      timeNano: now * 1_000_000
    }
    for (const stream of streams) {
      const types = stream.filters["type"]
      const events = stream.filters["event"]
      if (types !== undefined && !types.includes("container")) continue
      if (events !== undefined && !events.includes(action)) continue
      if (!matchesLabels(container.labels, stream.filters["label"])) continue
      stream.response.write(`${JSON.stringify(event)}\n`)
    }
  }

  const handle = (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://docker")
    requests.push({ method: request.method ?? "", path: url.pathname + url.search })
    const route = url.pathname.replace(/^\/v\d+\.\d+/, "")
    if (request.method !== "GET") return sendJson(response, 405, { message: "method not allowed" })
    const failing = docker.failing
    if (failing !== undefined && route !== "/events") return sendJson(response, failing.status, { message: failing.message })
    if (route === "/version") {
      return sendJson(response, 200, {
        Platform: { Name: "Docker Engine - Community" },
        Components: [{ Name: "Engine", Version: "27.3.1", Details: { ApiVersion: API_VERSION, MinAPIVersion: "1.24" } }],
        Version: "27.3.1",
        ApiVersion: API_VERSION,
        MinAPIVersion: "1.24",
        GitCommit: "41ca978",
        GoVersion: "go1.22.7",
        Os: "linux",
        Arch: "amd64",
        KernelVersion: "6.1.0",
        BuildTime: "2024-09-20T11:41:11.000000000+00:00"
      })
    }
    if (route === "/containers/json") {
      const filters = parseFilters(url)
      const all = url.searchParams.get("all") === "true" || url.searchParams.get("all") === "1"
      const list = [...containers.values()].filter(
        (c) =>
          (all || filters["status"] !== undefined || c.state !== "exited") &&
          (filters["status"] === undefined || filters["status"].includes(c.state)) &&
          matchesLabels(c.labels, filters["label"])
      )
      return sendJson(response, 200, list.map(summaryJson))
    }
    const inspect = /^\/containers\/([^/]+)\/json$/.exec(route)
    if (inspect !== null) {
      const container = find(decodeURIComponent(inspect[1]!))
      return container === undefined
        ? sendJson(response, 404, { message: `No such container: ${decodeURIComponent(inspect[1]!)}` })
        : sendJson(response, 200, inspectJson(container))
    }
    if (route === "/events") {
      response.writeHead(200, { "content-type": "application/json", "api-version": API_VERSION, server: "Docker/27.3.1 (linux)" })
      response.flushHeaders()
      const stream = { response, filters: parseFilters(url) }
      streams.add(stream)
      response.on("close", () => streams.delete(stream))
      return
    }
    return sendJson(response, 404, { message: "page not found" })
  }

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const next = createServer(handle)
      next.on("connection", (socket: Socket) => {
        sockets.add(socket)
        socket.on("close", () => sockets.delete(socket))
      })
      next.once("error", reject)
      const ready = () => {
        if (options.tcp === true) port = (next.address() as AddressInfo).port
        server = next
        resolve()
      }
      if (options.tcp === true) next.listen(port, "127.0.0.1", ready)
      else {
        rmSync(socketPath, { force: true })
        next.listen(socketPath, ready)
      }
    })

  const down = () =>
    new Promise<void>((resolve) => {
      const current = server
      server = undefined
      streams.clear()
      if (current === undefined) return resolve()
      current.close(() => resolve())
      for (const socket of sockets) socket.destroy()
      sockets.clear()
    })

  await listen()
  const docker: FakeDocker = {
    endpoint: options.tcp === true ? `tcp://127.0.0.1:${port}` : `unix://${socketPath}`,
    requests,
    containers,
    failing: undefined,
    run: (spec, runOptions = {}) => {
      const container: FakeContainer = {
        id: randomBytes(32).toString("hex"),
        name: spec.name,
        labels: { ...spec.labels },
        state: "running",
        created: Math.floor(Date.now() / 1000) + containers.size,
        networks: { ...(spec.networks ?? {}) },
        ports: spec.ports ?? [],
        networkMode: spec.networkMode ?? "bridge",
        image: spec.image ?? "itzg/minecraft-server:latest"
      }
      containers.set(container.id, container)
      if (runOptions.silent !== true) {
        emit(container, "create")
        emit(container, "start")
      }
      return container
    },
    start: (id) => {
      const container = containers.get(id)!
      container.state = "running"
      emit(container, "start")
    },
    stop: (id) => {
      const container = containers.get(id)!
      emit(container, "kill", { signal: "15" })
      container.state = "exited"
      emit(container, "die", { exitCode: "0" })
      emit(container, "stop")
    },
    die: (id) => {
      const container = containers.get(id)!
      container.state = "exited"
      emit(container, "die", { exitCode: "1" })
    },
    pause: (id) => {
      const container = containers.get(id)!
      container.state = "paused"
      emit(container, "pause")
    },
    unpause: (id) => {
      const container = containers.get(id)!
      container.state = "running"
      emit(container, "unpause")
    },
    rename: (id, name) => {
      const container = containers.get(id)!
      const oldName = container.name
      container.name = name
      emit(container, "rename", { oldName: `/${oldName}` })
    },
    destroy: (id) => {
      const container = containers.get(id)!
      containers.delete(id)
      emit(container, "destroy")
    },
    emitRaw: (line) => {
      for (const stream of streams) stream.response.write(`${line}\n`)
    },
    streams: () => streams.size,
    down,
    up: listen,
    close: async () => {
      await down()
      rmSync(dir, { recursive: true, force: true })
    }
  }
  running.push(docker)
  return docker
}
