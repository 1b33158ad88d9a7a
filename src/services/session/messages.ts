/** What players are told, in one place. */

export const MESSAGES = {
  unknownDomain: (host: string) => `§cThere is no server at §f${host.length > 0 ? host : "this address"}§c.`,
  serverFull: "§cThe server is full. Please try again later.",
  outdatedClient: "This server needs Minecraft 1.7 or newer.",
  clientOnlyUnavailable:
    "§cThis server is set up for authentication at the proxy (client_only), which this Portal version does not provide yet.",
  forwardingUnavailable: "§cThis server's player forwarding is misconfigured. Please tell the server owner.",
  starting: "§eThe server is starting. Please rejoin in a few seconds.",
  notAllowed: "§cYou are not allowed to connect to this server.",
  rateLimited: "§cToo many connection attempts. Please wait a moment and try again."
} as const
