/** `[containers]`: the endpoint shapes discovery can speak, and intervals that cannot spin. */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { parseContainerEndpoint } from "../../src/schema/ContainerEndpoint.js"
import { decodeGlobalText } from "../../src/schema/decode.js"
import { formatProblem } from "../../src/schema/problems.js"

const problems = (table: string): Array<string> =>
  Either.match(decodeGlobalText("proxy.toml", `[containers]\n${table}`), { onLeft: (ps) => ps.map(formatProblem), onRight: () => [] })

describe("[containers]", () => {
  it("endpoint: a unix socket, tcp://host:port or http://host[:port]", () => {
    expect(parseContainerEndpoint("unix:///var/run/docker.sock")).toEqual(Either.right({ _tag: "Unix", path: "/var/run/docker.sock" }))
    expect(parseContainerEndpoint("tcp://socket-proxy:2375")).toEqual(Either.right({ _tag: "Tcp", host: "socket-proxy", port: 2375 }))
    expect(parseContainerEndpoint("http://10.0.0.5/")).toEqual(Either.right({ _tag: "Tcp", host: "10.0.0.5", port: 80 }))
    expect(parseContainerEndpoint("tcp://[::1]:2375")).toEqual(Either.right({ _tag: "Tcp", host: "::1", port: 2375 }))
    expect(problems(`endpoint = "unix:///run/podman/podman.sock"\npoll_interval = "500ms"`)).toEqual([])
  })

  it("refuses what it cannot speak, saying why", () => {
    expect(problems(`endpoint = "/var/run/docker.sock"`)).toEqual([
      'proxy.toml: containers.endpoint: "/var/run/docker.sock" is not an endpoint: expected "unix:///path/to/socket", "tcp://host:port" or "http://host[:port]"'
    ])
    expect(problems(`endpoint = "unix://docker.sock"`)).toEqual([
      'proxy.toml: containers.endpoint: "unix://docker.sock" names no absolute socket path (expected "unix:///path/to/socket")'
    ])
    expect(problems(`endpoint = "tcp://docker"`)).toEqual([
      'proxy.toml: containers.endpoint: "tcp://docker": missing port in "docker" (expected host:port)'
    ])
    expect(problems(`endpoint = "http://docker:2375/v1.41"`)[0]).toMatch(/must be only a host and port/)
    expect(problems(`endpoint = "https://docker:2376"`)[0]).toMatch(/TLS endpoints are not supported/)
    expect(problems(`endpoint = "npipe:////./pipe/docker_engine"`)[0]).toMatch(/has scheme "npipe"/)
  })

  it("poll_interval and reconnect_delay must be above zero", () => {
    expect(problems(`poll_interval = "0s"\nreconnect_delay = "0ms"`)).toEqual([
      "proxy.toml: containers.poll_interval: expected a duration above zero",
      "proxy.toml: containers.reconnect_delay: expected a duration above zero"
    ])
  })
})
