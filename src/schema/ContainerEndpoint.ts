/**
 * `[containers].endpoint`: where the Docker Engine API (or Podman's Docker-compatible API) answers. A unix socket
 * (`unix:///var/run/docker.sock`) or plain HTTP over TCP (`tcp://host:port`, `http://host[:port]`). TLS is not
 * offered: the Engine API over TLS authenticates clients by certificate, which Portal has no keys for; a socket
 * proxy on the runtime's host is the way to reach a remote runtime.
 */
import * as Either from "effect/Either"
import { parseHostPort } from "./HostPort.js"

export type ContainerEndpoint =
  | { readonly _tag: "Unix"; readonly path: string }
  | { readonly _tag: "Tcp"; readonly host: string; readonly port: number }

export const DEFAULT_CONTAINER_ENDPOINT = "unix:///var/run/docker.sock"

const SHAPES = `expected "unix:///path/to/socket", "tcp://host:port" or "http://host[:port]"`

/** Parses an endpoint; the reason names what is wrong with it. */
export const parseContainerEndpoint = (text: string): Either.Either<ContainerEndpoint, string> => {
  const quoted = JSON.stringify(text)
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(text)?.[1]?.toLowerCase()
  if (scheme === undefined) return Either.left(`${quoted} is not an endpoint: ${SHAPES}`)
  const rest = text.slice(scheme.length + 3)
  switch (scheme) {
    case "unix":
      return rest.startsWith("/") && rest.length > 1
        ? Either.right({ _tag: "Unix", path: rest })
        : Either.left(`${quoted} names no absolute socket path (expected "unix:///path/to/socket")`)
    case "tcp":
    case "http": {
      const authority = rest.replace(/\/$/, "")
      if (authority.includes("/") || authority.includes("?") || authority.includes("@")) {
        return Either.left(`${quoted} must be only a host and port (${SHAPES})`)
      }
      const parsed = parseHostPort(authority, scheme === "http" ? { defaultPort: 80 } : {})
      return Either.mapBoth(parsed, {
        onLeft: (reason) => `${quoted}: ${reason}`,
        onRight: ({ host, port }): ContainerEndpoint => ({ _tag: "Tcp", host, port })
      })
    }
    case "https":
      return Either.left(
        `${quoted}: TLS endpoints are not supported (the Engine API over TLS needs client certificates); use a unix socket, or tcp:// through a socket proxy on the runtime's host`
      )
    default:
      return Either.left(`${quoted} has scheme "${scheme}": ${SHAPES}`)
  }
}
