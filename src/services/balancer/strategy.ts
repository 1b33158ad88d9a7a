/**
 * The balancing arithmetic, pure: the order in which a server's addresses are tried, from their weights, live
 * session counts, ejections, health and slow start. The Balancer service owns the state and the clock.
 */
import type { BackendAddress, BalanceStrategy } from "../../schema/ServerConfig.js"

export interface AddressState {
  /** Live sessions on this address. */
  active: number
  /** Smooth weighted round robin accumulator. */
  currentWeight: number
  /** Consecutive failed connects. */
  failures: number
  /** Epoch ms until which a failed address is tried only after the others. */
  ejectedUntil: number
  /** Epoch ms when the address last became healthy again; slow start ramps from here. */
  recoveredAt: number | undefined
  /** The active health check's verdict (healthy until a probe says otherwise). */
  healthy: boolean
  /** Order of the last pick, to break ties fairly. */
  lastPicked: number
}

export const freshState = (): AddressState => ({
  active: 0,
  currentWeight: 0,
  failures: 0,
  ejectedUntil: 0,
  recoveredAt: undefined,
  healthy: true,
  lastPicked: 0
})

export interface Candidate {
  readonly address: BackendAddress
  readonly state: AddressState
}

export interface SlowStart {
  readonly windowMs: number
  readonly aggression: number
}

/** Share of its weight an address gets at least while ramping up, so that it is ever picked. */
export const SLOW_START_MIN_FACTOR = 0.1
const MAX_EJECTION_MS = 60_000

/** Back-off after `failures` consecutive failures: 1 s, 2 s, 4 s ... up to 60 s. */
export const ejectionMillis = (failures: number): number => Math.min(MAX_EJECTION_MS, 1000 * 2 ** Math.max(0, failures - 1))

/** The ramp: progress through the window raised to `aggression` (1 linear, higher gentler at first). */
export const slowStartFactor = (state: AddressState, now: number, slowStart: SlowStart | undefined): number => {
  if (slowStart === undefined || state.recoveredAt === undefined || slowStart.windowMs <= 0) return 1
  const progress = (now - state.recoveredAt) / slowStart.windowMs
  if (progress >= 1) return 1
  return Math.max(SLOW_START_MIN_FACTOR, Math.max(0, progress) ** slowStart.aggression)
}

export const effectiveWeight = (candidate: Candidate, now: number, slowStart: SlowStart | undefined): number =>
  candidate.address.weight * slowStartFactor(candidate.state, now, slowStart)

/** 0: usable; 1: drained (weight 0); 2: ejected or unhealthy, tried last. */
const tierOf = (candidate: Candidate, now: number): number =>
  !candidate.state.healthy || candidate.state.ejectedUntil > now ? 2 : candidate.address.weight === 0 ? 1 : 0

let pickCounter = 0

/** Where pick order numbers come from: by default this module's counter; worker threads share one per server. */
export type NextPick = () => number

const nextLocalPick: NextPick = () => ++pickCounter

/** Smooth weighted round robin (as nginx): every candidate gains its weight, the richest is picked and pays the total. */
const pickRoundRobin = (usable: Array<Candidate>, now: number, slowStart: SlowStart | undefined): Candidate => {
  let total = 0
  let best: Candidate | undefined
  for (const candidate of usable) {
    const weight = effectiveWeight(candidate, now, slowStart)
    candidate.state.currentWeight += weight
    total += weight
    if (best === undefined || candidate.state.currentWeight > best.state.currentWeight) best = candidate
  }
  best!.state.currentWeight -= total
  return best!
}

/** Fewest live sessions per unit of weight; ties go to the one picked least recently. */
const pickLeastConn = (usable: Array<Candidate>, now: number, slowStart: SlowStart | undefined): Candidate => {
  let best: Candidate | undefined
  let bestScore = Infinity
  for (const candidate of usable) {
    const score = candidate.state.active / effectiveWeight(candidate, now, slowStart)
    if (score < bestScore || (score === bestScore && candidate.state.lastPicked < best!.state.lastPicked)) {
      best = candidate
      bestScore = score
    }
  }
  return best!
}

/**
 * The order to try the addresses in: usable ones first (by strategy), then drained ones, then ejected or
 * unhealthy ones, so that a login still gets a chance when everything looks down. `nextPick` numbers the pick
 * (`lastPicked`, for least_conn ties).
 */
export const orderCandidates = (
  strategy: BalanceStrategy,
  candidates: ReadonlyArray<Candidate>,
  now: number,
  slowStart: SlowStart | undefined,
  nextPick: NextPick = nextLocalPick
): Array<Candidate> => {
  const tiers: [Array<Candidate>, Array<Candidate>, Array<Candidate>] = [[], [], []]
  for (const candidate of candidates) tiers[tierOf(candidate, now)]!.push(candidate)
  const [usable, drained, down] = tiers
  // Among the addresses that look down, probe failures go after passive ejections, and the soonest back first.
  down.sort((a, b) => Number(!a.state.healthy) - Number(!b.state.healthy) || a.state.ejectedUntil - b.state.ejectedUntil)
  if (usable.length > 1 && strategy !== "first_available") {
    const first = strategy === "round_robin" ? pickRoundRobin(usable, now, slowStart) : pickLeastConn(usable, now, slowStart)
    usable.splice(usable.indexOf(first), 1)
    usable.unshift(first)
  }
  if (usable.length > 0) usable[0]!.state.lastPicked = nextPick()
  return [...usable, ...drained, ...down]
}
