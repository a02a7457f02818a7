/**
 * WorkGate: bounds the heavy admin requests in flight — `running` at once (the planner's threads),
 * `queued` more waiting in arrival order, and beyond that an immediate refusal (the app answers
 * 503 with Retry-After) — so a burst of split comparisons costs bounded memory and never piles
 * work on the server. Pure: no timers; a waiting request starts when one before it leaves.
 * Invariants: 0 <= active <= running; waiting.length <= queued; a queue only while all run.
 */

/** Lets a request leave the gate (idempotent). */
export type Leave = () => void;

/** Admission to a bounded pool of work. */
export class WorkGate {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly running: number,
    private readonly queued: number,
  ) {}

  /** Requests running and waiting now. */
  get load(): { active: number; waiting: number } {
    return { active: this.active, waiting: this.waiting.length };
  }

  /** Enters (at once, or when a place frees), or null when the gate and its queue are full. */
  enter(): Promise<Leave> | null {
    if (this.active < this.running) {
      this.active++;
      return Promise.resolve(this.leaver());
    }
    if (this.waiting.length >= this.queued) return null;
    return new Promise<Leave>((resolve) => {
      this.waiting.push(() => resolve(this.leaver()));
    });
  }

  private leaver(): Leave {
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const next = this.waiting.shift();
      if (next !== undefined) next();
      else this.active--;
    };
  }
}
