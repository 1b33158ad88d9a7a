/** Player names as Portal reads them from its files and its API (ban targets, `[permissions] admins`). */

// Offline-mode and Bedrock-bridge names go beyond [A-Za-z0-9_], so only the protocol's limits are enforced.
const PLAYER_NAME = /^[^\s\p{Cc}]{1,16}$/u

/** 1 to 16 characters, no spaces or control characters. */
export const isPlayerName = (text: string): boolean => PLAYER_NAME.test(text)
