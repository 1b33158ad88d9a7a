/**
 * Pass-through frames of one direction, gathered into as few writes as possible: frames that follow each other in the
 * same received buffer are one range of it, written once (no copy) when the range is broken or the chunk is done.
 */
export class Coalescer {
  private buffer: Buffer | undefined = undefined
  private start = 0
  private end = 0

  constructor(private readonly sink: (bytes: Buffer) => void) {}

  /** Adds `buffer[start, end)`; extends the pending range when it continues it, else flushes it first. */
  add(buffer: Buffer, start: number, end: number): void {
    if (this.buffer === buffer && this.end === start) {
      this.end = end
      return
    }
    this.flush()
    this.buffer = buffer
    this.start = start
    this.end = end
  }

  /** Writes the pending range, if any. Called before anything else is written in this direction, and per chunk. */
  flush(): void {
    const buffer = this.buffer
    if (buffer === undefined) return
    this.buffer = undefined
    this.sink(this.start === 0 && this.end === buffer.length ? buffer : buffer.subarray(this.start, this.end))
  }

  /** Forgets the pending range (the session is ending and its destination is gone). */
  drop(): void {
    this.buffer = undefined
  }
}
