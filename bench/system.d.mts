/** Types of system.mjs, for the tests and the bench's own modules. */
export type ProcessCpu = { name: string; started: number; seconds: number }
export declare const cpuSeconds: (pid: number) => number
export declare const everyProcessCpuSeconds: () => Map<number, ProcessCpu>
export declare const otherCpuSeconds: (
  before: Map<number, ProcessCpu>,
  after: Map<number, ProcessCpu>,
  bench: ReadonlyArray<number>
) => number
export declare const stealSeconds: () => number
export declare const rssBytes: (pid: number) => number
export declare const canPin: () => boolean
export declare const pin: (pid: number, cpus: number | string) => void
export declare const allCpus: () => string
export declare const coresPlan: () => { pinned: boolean; load: string; proxy: string; proxyCpus: number; loadCpus: number }
export declare const raiseFileLimit: (wanted: number) => { soft: number; hard: number }
export declare const widenEphemeralPorts: () => { low: number; high: number; widenedFrom: string | undefined; restore: () => void }
export declare const freePort: () => Promise<number>
export declare const waitForPort: (port: number, dead: () => string | undefined, timeoutMs?: number) => Promise<void>
export declare const sleep: (ms: number) => Promise<void>
export declare const machine: () => {
  cpu: string
  cores: number
  memoryGiB: number
  kernel: string
  node: string
  loadAverage: string
}
