/**
 * ConsumerRegistry: the server's durable consumers — each a name, a filter and a stored position
 * (the seq after the last acknowledged one), persisted through the ConsumerStore port
 * (ports.ts). It decides who may attach (CONSUMER_BUSY, CONSUMER_MISMATCH, CONSUMERS_FULL), moves
 * positions on acknowledgements (cumulative, never backwards) and lists and removes consumers for
 * the admin API.
 *
 *   SUBSCRIBE durable ─▶ attach ─▶ new: position set when the subscription begins (its first seq)
 *                                 └ known: the subscription starts at the position
 *   ACK seq ─▶ ack ─▶ position = max(position, seq + 1) ─▶ store.save (batched by the store)
 *   UNSUBSCRIBE / close ─▶ detach (the position stays)
 *
 * Not here: which seqs a subscription delivered (dispatch checks an ACK against the
 * subscription's nextSeq), reading and writing the file (src/runtime/consumer_file.ts), shared
 * groups' member assignment (a group is a consumer with `shared` and several members).
 * Invariants: a consumer's position never decreases; a consumer with no position yet (its first
 * subscription has not begun) is never stored and goes away when that subscription ends; at most
 * `consumersMax` consumers; a non-shared consumer has at most one member.
 */
import type { AriaErrorCode } from "../protocol/mod.ts";
import { CONSUMERS_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import type { Filter } from "../topic/filter.ts";
import type { ConsumerRecord, ConsumerStore, GroupRecord } from "./ports.ts";

/** One durable consumer, as the broker holds it. */
export class Consumer {
  /** Open subscriptions of it (at most 1 unless shared). */
  members = 0;
  /**
   * A shared group's unacknowledged seqs below its read position, as its last member left it
   * (group_cursor.ts), or null: everything from nextSeq is still to deliver.
   */
  group: GroupRecord | null = null;

  constructor(
    readonly name: string,
    /** Its filter's entries, normalised (Filter.toStrings()). */
    readonly filter: readonly string[],
    readonly shared: boolean,
    /** The seq after the last acknowledged one; 0 until its first subscription began. */
    public nextSeq: number,
    /** When it was last subscribed to or acknowledged (µs). */
    public lastActiveUs: number,
    private readonly registry: ConsumerRegistry,
    /** The user who created it (with --users), or null: anyone may subscribe to it. */
    readonly owner: string | null = null,
  ) {}

  /** A subscription of it began at `firstSeq` (SUBSCRIBED): a new consumer's position. */
  began(firstSeq: number): void {
    this.registry.began(this, firstSeq);
  }

  /** Its stored form. */
  record(): ConsumerRecord {
    return {
      name: this.name,
      filter: this.filter,
      shared: this.shared,
      nextSeq: this.nextSeq,
      lastActiveUs: this.lastActiveUs,
      ...(this.group === null ? {} : { group: this.group }),
      ...(this.owner === null ? {} : { owner: this.owner }),
    };
  }
}

/** A consumer as the admin API lists it. */
export interface ConsumerInfo {
  name: string;
  filter: readonly string[];
  shared: boolean;
  /** The last acknowledged seq (nextSeq - 1; 0: none). */
  ackedSeq: number;
  /** Where a subscription of it starts. */
  nextSeq: number;
  /** Seqs published after its position: an upper bound of the matching ones not yet acknowledged. */
  pendingSeqs: number;
  /** Open subscriptions of it. */
  members: number;
  lastActiveUs: number;
  /** The user who created it, or null (no --users then). */
  owner: string | null;
}

/** Why attach refused. */
export interface AttachRefusal {
  code: AriaErrorCode;
  reason: string;
}

/** The durable consumers of one server. */
export class ConsumerRegistry {
  private readonly consumers = new Map<string, Consumer>();

  constructor(
    private readonly store: ConsumerStore | undefined,
    private readonly consumersMax: number = CONSUMERS_MAX,
    /**
     * The message store's next seq at start: a position past it names seqs a crash lost (a store
     * without fsync always), which new messages will take again, so it is cut back to it.
     */
    seqEnd: number = Number.POSITIVE_INFINITY,
  ) {
    for (const record of store?.load() ?? []) {
      assert(record.nextSeq >= 1, "a stored consumer has a position");
      const group = clampedGroup(record.group, seqEnd);
      const consumer = new Consumer(
        record.name,
        record.filter,
        record.shared,
        Math.max(1, Math.min(record.nextSeq, group?.unackedSeqs[0] ?? seqEnd)),
        record.lastActiveUs,
        this,
        record.owner ?? null,
      );
      consumer.group = group;
      this.consumers.set(record.name, consumer);
    }
  }

  /** How many consumers exist. */
  get size(): number {
    return this.consumers.size;
  }

  /** The consumer named `name`, or undefined. */
  get(name: string): Consumer | undefined {
    return this.consumers.get(name);
  }

  /**
   * A subscription of consumer `name` with `filter` opens: the consumer (created when new, with no
   * position until `began`; owned by `user` when one is signed in), or why not (another user's
   * consumer: PERMISSION_DENIED).
   */
  attach(
    name: string,
    filter: Filter,
    options: { shared: boolean; nowUs: number; user?: string | null },
  ): { ok: true; consumer: Consumer } | ({ ok: false } & AttachRefusal) {
    const user = options.user ?? null;
    const texts = filter.toStrings();
    let consumer = this.consumers.get(name);
    if (consumer === undefined) {
      if (this.consumers.size >= this.consumersMax)
        return {
          ok: false,
          code: "ARIA_ERR_CONSUMERS_FULL",
          reason: `server holds ${this.consumers.size} durable consumers, the limit; remove unused ones (aria consumers rm NAME)`,
        };
      consumer = new Consumer(name, texts, options.shared, 0, options.nowUs, this, user);
      this.consumers.set(name, consumer);
    } else if (user !== null && consumer.owner !== null && consumer.owner !== user) {
      return {
        ok: false,
        code: "ARIA_ERR_PERMISSION_DENIED",
        reason: `durable consumer "${name}" belongs to another user; use another name`,
      };
    } else if (consumer.shared !== options.shared) {
      return {
        ok: false,
        code: "ARIA_ERR_CONSUMER_MISMATCH",
        reason: `durable consumer "${name}" is ${consumer.shared ? "a shared group" : "not shared"}; subscribe ${consumer.shared ? "with" : "without"} SHARED, or use another name`,
      };
    } else if (!sameTexts(consumer.filter, texts)) {
      return {
        ok: false,
        code: "ARIA_ERR_CONSUMER_MISMATCH",
        reason: `durable consumer "${name}" has filter ${consumer.filter.join(",")}, not ${texts.join(",")}; remove it first (aria consumers rm ${name}) or use another name`,
      };
    } else if (!consumer.shared && consumer.members > 0) {
      return {
        ok: false,
        code: "ARIA_ERR_CONSUMER_BUSY",
        reason: `durable consumer "${name}" already has a subscription open (one at a time)`,
      };
    }
    consumer.members++;
    consumer.lastActiveUs = options.nowUs;
    return { ok: true, consumer };
  }

  /** The first subscription of a new consumer began at `firstSeq`: its position, stored. */
  began(consumer: Consumer, firstSeq: number): void {
    if (consumer.nextSeq !== 0 || this.consumers.get(consumer.name) !== consumer) return;
    consumer.nextSeq = Math.max(1, firstSeq);
    this.store?.save(consumer.record());
  }

  /** Everything up to `seq` was processed: the position moves past it (never back). */
  ack(consumer: Consumer, seq: number, nowUs: number): void {
    consumer.lastActiveUs = nowUs;
    if (seq + 1 <= consumer.nextSeq || this.consumers.get(consumer.name) !== consumer) return;
    consumer.nextSeq = seq + 1;
    consumer.group = groupAbove(consumer.group, consumer.nextSeq);
    this.store?.save(consumer.record());
  }

  /**
   * A shared group's whole position (its last member left, the server stops, or a write interval
   * passed while it reads): its lowest unacknowledged seq, and `group` lists what else below
   * `group.readSeq` is unacknowledged (never back; a position not past the stored one stores
   * nothing). Later ACKs keep the list, less what falls below the position: a seq listed and
   * acknowledged since comes again after a crash, one not listed never.
   */
  saveGroup(consumer: Consumer, group: GroupRecord): void {
    const nextSeq = group.unackedSeqs[0] ?? group.readSeq;
    if (consumer.nextSeq === 0) return; // never began: it has no position to store
    if (nextSeq < consumer.nextSeq || this.consumers.get(consumer.name) !== consumer) return;
    consumer.nextSeq = nextSeq;
    consumer.group = group.readSeq > nextSeq ? group : null;
    this.store?.save(consumer.record());
  }

  /** A subscription of `consumer` ended; a consumer that never got a position goes away. */
  detach(consumer: Consumer): void {
    assert(consumer.members > 0, "detach follows attach");
    consumer.members--;
    if (consumer.members === 0 && consumer.nextSeq === 0) this.consumers.delete(consumer.name);
  }

  /** Removes consumer `name`: "unknown", "busy" (a subscription of it is open) or "removed". */
  remove(name: string): "removed" | "unknown" | "busy" {
    const consumer = this.consumers.get(name);
    if (consumer === undefined || consumer.nextSeq === 0) return "unknown";
    if (consumer.members > 0) return "busy";
    this.consumers.delete(name);
    this.store?.remove(name);
    return "removed";
  }

  /** Every consumer with a position, by name; `visibleSeq` estimates what each has pending. */
  list(visibleSeq: number): ConsumerInfo[] {
    const infos: ConsumerInfo[] = [];
    for (const consumer of this.consumers.values()) {
      if (consumer.nextSeq === 0) continue;
      infos.push({
        name: consumer.name,
        filter: consumer.filter,
        shared: consumer.shared,
        ackedSeq: consumer.nextSeq - 1,
        nextSeq: consumer.nextSeq,
        pendingSeqs: Math.max(0, visibleSeq - consumer.nextSeq),
        members: consumer.members,
        lastActiveUs: consumer.lastActiveUs,
        owner: consumer.owner,
      });
    }
    return infos.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
}

/** `group` less the unacknowledged seqs below `nextSeq`; null when nothing is left above it. */
function groupAbove(group: GroupRecord | null, nextSeq: number): GroupRecord | null {
  if (group === null || group.readSeq <= nextSeq) return null;
  const unackedSeqs = group.unackedSeqs.filter((seq) => seq >= nextSeq);
  return unackedSeqs.length === 0 ? null : { readSeq: group.readSeq, unackedSeqs };
}

/** A group record with its read position cut back to `seqEnd` (null when nothing is left of it). */
function clampedGroup(group: GroupRecord | undefined, seqEnd: number): GroupRecord | null {
  if (group === undefined) return null;
  const readSeq = Math.min(group.readSeq, seqEnd);
  const unackedSeqs = group.unackedSeqs.filter((seq) => seq < readSeq);
  return unackedSeqs.length > 0 ? { readSeq, unackedSeqs } : null;
}

function sameTexts(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((text, index) => text === b[index]);
}
