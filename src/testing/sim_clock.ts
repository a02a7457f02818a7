/**
 * SimClock and SimScheduler: simulated time for the deterministic simulator. The clock moves only
 * when the simulator advances it; the scheduler holds the broker's `soon` tasks (run FIFO when the
 * simulator drains) and one-shot timers (the store's interval fsync), which fire in (due time,
 * creation order) when the clock passes them. Nothing here reads a real clock or sets a real timer.
 *
 * Each server life gets its own generation: `reset()` (a crash) drops every task and timer of the
 * dead process, so a killed broker's work can never run in its successor's world.
 *
 * Invariants: timers fire in nondecreasing due time; tasks run in the order they were queued.
 */
import type { Clock, Scheduler } from "../broker/ports.ts";

/** Simulated wall-clock time, µs since the epoch. */
export class SimClock implements Clock {
  constructor(public timeUs: number) {}

  nowUs(): number {
    return this.timeUs;
  }

  /** Moves time forward (never back). */
  advance(us: number): void {
    this.timeUs += Math.max(0, us);
  }
}

type Timer = { dueUs: number; order: number; run: () => void };

/** The broker's Scheduler and the store's one-shot timer, both under the simulator's control. */
export class SimScheduler implements Scheduler {
  private tasks: (() => void)[] = [];
  private timers: Timer[] = [];
  private order = 0;

  constructor(private readonly clock: SimClock) {}

  soon(task: () => void): void {
    this.tasks.push(task);
  }

  /** The store's `schedule` option: run `run` once `delayMs` of simulated time has passed. */
  readonly schedule = (delayMs: number, run: () => void): void => {
    this.timers.push({ dueUs: this.clock.timeUs + delayMs * 1000, order: this.order++, run });
  };

  /** Tasks queued and not yet run. */
  get pendingTasks(): number {
    return this.tasks.length;
  }

  /** Runs the tasks queued so far (tasks they queue wait for the next call); returns how many ran. */
  runTasks(): number {
    const tasks = this.tasks;
    this.tasks = [];
    for (const task of tasks) task();
    return tasks.length;
  }

  /** Fires every timer due at the current time, earliest first; returns how many fired. */
  fireDueTimers(): number {
    const now = this.clock.timeUs;
    const due = this.timers
      .filter((t) => t.dueUs <= now)
      .sort((a, b) => a.dueUs - b.dueUs || a.order - b.order);
    if (due.length === 0) return 0;
    this.timers = this.timers.filter((t) => t.dueUs > now);
    for (const timer of due) timer.run();
    return due.length;
  }

  /** A crash: the dead process's tasks and timers never run. */
  reset(): void {
    this.tasks = [];
    this.timers = [];
  }
}
