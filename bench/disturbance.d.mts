/** Types of disturbance.mjs, for the tests. */
export declare const DISTURBED_PERCENT: number
export declare const MAX_REPEATS: number
export declare const disturbanceOf: (sample: Record<string, unknown> | undefined) => number
export declare const isDisturbed: (sample: Record<string, unknown> | undefined) => boolean
export declare const measureUndisturbed: <S extends Record<string, unknown>>(
  measure: () => Promise<S>,
  maxRepeats?: number
) => Promise<{ sample: S; attempts: Array<number> }>
export declare const repeatNote: (
  repeats: Array<{ scenario: string; target: string; round: number; attempts: Array<number> }>
) => Array<string>
