/**
 * Versions the codec tests run against minecraft-protocol: the ones the issue names (1.7.10, 1.8.8, 1.12.2, 1.16.5,
 * 1.19, 1.19.4, 1.20.1, 1.20.2, 1.20.4, 1.20.6, 1.21.4, 26.1), then both sides of every layout change the codecs
 * know that those do not already straddle. Login: 1.9, 1.12.1, 1.13, 1.15.2, 1.16, 1.19.2, 1.19.3, 1.21.1, 1.21.3.
 * Configuration and play (compiling minecraft-protocol's play codecs is the slow part): 1.12.1, 1.16, 1.19.2.
 */
export const REQUIRED_VERSIONS = [5, 47, 340, 754, 759, 762, 763, 764, 765, 766, 769, 775]
const sorted = (versions: ReadonlyArray<number>) => [...versions].sort((a, b) => a - b)
export const LOGIN_TEST_VERSIONS = sorted([...REQUIRED_VERSIONS, 107, 338, 393, 578, 735, 760, 761, 767, 768])
export const GAME_TEST_VERSIONS = sorted([...REQUIRED_VERSIONS, 338, 735, 760])
