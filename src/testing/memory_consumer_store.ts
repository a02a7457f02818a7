/**
 * MemoryConsumerStore: the ConsumerStore port (broker/ports.ts) in memory, for tests and the
 * simulator. `save` and `remove` take effect at once unless `buffered`: then they wait for
 * `flush()`, as the runtime's file writes in batches, so a test can "crash" between the two
 * (`crash()` drops what was not flushed).
 * Not here: files, CRCs (src/runtime/consumer_file.ts).
 */
import type { ConsumerRecord, ConsumerStore } from "../broker/ports.ts";

/** Durable consumers' records in memory. */
export class MemoryConsumerStore implements ConsumerStore {
  private readonly stored = new Map<string, ConsumerRecord>();
  private readonly pending = new Map<string, ConsumerRecord | null>();
  /** Saves and removes seen (for tests that count writes). */
  writes = 0;

  constructor(private readonly buffered = false) {}

  load(): readonly ConsumerRecord[] {
    return [...this.stored.values()];
  }

  save(record: ConsumerRecord): void {
    this.writes++;
    this.pending.set(record.name, { ...record, filter: [...record.filter] });
    if (!this.buffered) this.flush();
  }

  remove(name: string): void {
    this.writes++;
    this.pending.set(name, null);
    if (!this.buffered) this.flush();
  }

  /** Writes what was saved or removed since the last flush. */
  flush(): void {
    for (const [name, record] of this.pending) {
      if (record === null) this.stored.delete(name);
      else this.stored.set(name, record);
    }
    this.pending.clear();
  }

  /** A crash: what was not flushed is lost. */
  crash(): void {
    this.pending.clear();
  }
}
