/**
 * topic_cache: a reader's topics, found by their stored bytes. A lane meets each record's topic as
 * ASCII bytes in its buffer; this table gives the topic's name, a copy of its bytes (a DATA frame
 * wants bytes, not a name) and whether the reader's filter takes it, without building a string
 * per record: the bytes are hashed and compared, and a name is decoded once per topic.
 *
 *   record bytes ─hash─▶ slots (open addressing, linear probe) ─▶ entry: name, bytes, match
 *
 * Kept per reader, not per lane: a partition's topics interleave (100 of them in a whole-stream
 * read missed a lane's last 8 and decoded a string for most records, then the broker looked each
 * fresh string up again), and one table serves every partition a reader reads.
 *
 * Does no I/O. Bounded: at TOPIC_CACHE_ENTRIES_MAX topics it starts again empty (a reader of more
 * topics decodes some again). Invariants: an entry's bytes equal its name's char codes; the
 * objects an entry hands out are never changed, so a lane may keep them across a reset.
 */
import { TOPIC_CACHE_ENTRIES_MAX } from "../../constants.ts";
import type { Filter } from "../../topic/mod.ts";
import { RECORD_TOPIC_BYTES_OFFSET, RECORD_TOPIC_OFFSET } from "../record.ts";

const EMPTY_SLOT = -1;
const MATCH_UNKNOWN = 0;
const MATCH_NO = 1;
const MATCH_YES = 2;

/** One reader's topics by their bytes: name, bytes and whether the filter takes them. */
export class TopicCache {
  /** Per entry: the topic's name and its bytes (a copy: the read buffers come and go). */
  readonly names: string[] = [];
  readonly bytes: Uint8Array[] = [];
  private hashes = new Int32Array(64);
  private matchOf = new Uint8Array(64);
  /** Entry index per slot (EMPTY_SLOT: none); its length a power of two, at least twice entries. */
  private slots = new Int32Array(128).fill(EMPTY_SLOT);

  constructor(private readonly filter: Filter) {}

  /** Topics held. */
  get size(): number {
    return this.names.length;
  }

  /**
   * The entry of the topic of the (checked) record at `at` of `buffer`, added when new: its index
   * is valid until the next call (a call may start the table again).
   */
  find(buffer: Uint8Array, view: DataView, at: number): number {
    const length = view.getUint16(at + RECORD_TOPIC_BYTES_OFFSET, true);
    const from = at + RECORD_TOPIC_OFFSET;
    // FNV-1a over the topic's bytes.
    let hash = 0x811c9dc5 | 0;
    for (let i = 0; i < length; i++) hash = Math.imul(hash ^ buffer[from + i], 0x01000193);
    const slots = this.slots;
    const mask = slots.length - 1;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const entry = slots[slot];
      if (entry === EMPTY_SLOT) break;
      if (this.hashes[entry] !== hash) continue;
      const known = this.bytes[entry];
      if (known.length !== length) continue;
      let i = 0;
      while (i < length && known[i] === buffer[from + i]) i++;
      if (i === length) return entry;
    }
    return this.add(buffer.slice(from, from + length), hash);
  }

  /** Whether the reader's filter takes the topic of entry `entry` (decided once per topic). */
  matches(entry: number): boolean {
    let match = this.matchOf[entry];
    if (match === MATCH_UNKNOWN) {
      match = this.filter.matches(this.names[entry]) ? MATCH_YES : MATCH_NO;
      this.matchOf[entry] = match;
    }
    return match === MATCH_YES;
  }

  private add(bytes: Uint8Array, hash: number): number {
    if (this.names.length >= TOPIC_CACHE_ENTRIES_MAX) this.clear();
    const entry = this.names.length;
    if (entry === this.hashes.length) {
      const hashes = new Int32Array(entry * 2);
      hashes.set(this.hashes);
      this.hashes = hashes;
      const matchOf = new Uint8Array(entry * 2);
      matchOf.set(this.matchOf);
      this.matchOf = matchOf;
    }
    this.names.push(String.fromCharCode.apply(null, bytes as unknown as number[]));
    this.bytes.push(bytes);
    this.hashes[entry] = hash;
    this.matchOf[entry] = MATCH_UNKNOWN;
    if (2 * (entry + 1) > this.slots.length) this.rehash(this.slots.length * 2);
    else this.place(entry);
    return entry;
  }

  private place(entry: number): void {
    const slots = this.slots;
    const mask = slots.length - 1;
    let slot = this.hashes[entry] & mask;
    while (slots[slot] !== EMPTY_SLOT) slot = (slot + 1) & mask;
    slots[slot] = entry;
  }

  private rehash(size: number): void {
    this.slots = new Int32Array(size).fill(EMPTY_SLOT);
    for (let entry = 0; entry < this.names.length; entry++) this.place(entry);
  }

  private clear(): void {
    this.names.length = 0;
    this.bytes.length = 0;
    this.slots.fill(EMPTY_SLOT);
  }
}
