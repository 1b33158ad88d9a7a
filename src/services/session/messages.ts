/** What players are told, in one place. */

export const MESSAGES = {
  unknownDomain: (host: string) => `§cThere is no server at §f${host.length > 0 ? host : "this address"}§c.`,
  serverFull: "§cThe server is full. Please try again later.",
  outdatedClient: "This server needs Minecraft 1.7 or newer.",
  forwardingUnavailable: "§cThis server's player forwarding is misconfigured. Please tell the server owner.",
  /** Modern (Velocity) forwarding rides on login plugin messages, which 1.13 introduced. */
  modernNeeds113: "§cThis server needs Minecraft 1.13 or newer.",
  /** A packet mode met a client version its packet table does not know. */
  unsupportedVersion: (range: string) => `§cThis server supports Minecraft ${range}. Please connect with one of those versions.`,
  starting: "§eThe server is starting. Please rejoin in a few seconds.",
  /** A packet mode's player whose UUID is on the proxy already (as BungeeCord and Velocity say it). */
  alreadyConnected: "§cYou are already connected to this proxy!",
  notAllowed: "§cYou are not allowed to connect to this server.",
  rateLimited: "§cToo many connection attempts. Please wait a moment and try again.",
  // Authentication at the proxy (client_only).
  notAuthenticated: "§cFailed to verify your username. Restart your game and launcher, then try again.",
  sessionServiceDown: "§cThe authentication servers are unreachable. Please try again later.",
  badEncryption: "§cThe login could not be encrypted (bad encryption response). Please try again.",
  // The packet relay.
  backendClosed: "§cThe server closed the connection.",
  backendTimedOut: "§cThe server stopped responding.",
  backendBroke: "§cThe server sent data the proxy could not read.",
  backendOnlineMode: "§cThis server is misconfigured (the backend runs in online mode behind a proxy; it must run in offline mode). Please tell the server owner.",
  badPacket: "§cYour client sent a packet the proxy could not read.",
  /** The player did not send Login Start or Encryption Response in time. */
  loginTooSlow: "§cTook too long to log in."
} as const
