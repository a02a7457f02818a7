/**
 * TopicCache: topic bytes → validated topic string, so a decoder turns the topic of a message into
 * a string without allocating when it has seen those bytes before (topics repeat: a stream has far
 * fewer topics than messages). Direct-mapped: a slot holds the last topic that hashed to it; a
 * collision only costs a re-decode. Only valid topics are cached, so a hit needs no validation.
 * A valid topic is printable ASCII (topic.ts), so its bytes are its char codes: a slot holds the
 * string alone, compared with the bytes code by code: a new topic costs one decode and no copy
 * of its bytes.
 * Shareable between decoders of one thread (a broker may give all connections one cache).
 * Invariant: slotTopics[i] !== null ⇒ slotTopics[i] is a valid topic (ASCII).
 */
import { TOPIC_BYTES_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { validateTopic } from "../topic/mod.ts";

const SLOTS_DEFAULT = 1024;
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A direct-mapped cache of validated topic strings keyed by their bytes. */
export class TopicCache {
  private readonly mask: number;
  private readonly slotTopics: (string | null)[];
  /** The slot of the last topic resolved. */
  private lastSlot = 0;
  /** Why the last `resolve` returned null. */
  reason = "";

  constructor(options: { slots?: number } = {}) {
    const slots = options.slots ?? SLOTS_DEFAULT;
    assert(slots > 0 && (slots & (slots - 1)) === 0, "topic cache slots are a power of two");
    this.mask = slots - 1;
    this.slotTopics = new Array(slots).fill(null);
  }

  /** The topic spelled by bytes[start, start + length), or null (see `reason`) when it is invalid. */
  resolve(bytes: Uint8Array, start: number, length: number): string | null {
    // Runs of one topic are common (a batch, a hot topic): the last slot hit is tried before hashing.
    const last = this.slotTopics[this.lastSlot];
    if (last !== null && spells(last, bytes, start, length)) return last;
    let hash = 0x811c9dc5 ^ length;
    for (let i = 0; i < length; i++) hash = Math.imul(hash ^ bytes[start + i], 0x01000193);
    const slot = (hash ^ (hash >>> 15)) & this.mask;
    const cached = this.slotTopics[slot];
    if (cached !== null && spells(cached, bytes, start, length)) {
      this.lastSlot = slot;
      return cached;
    }
    const topic = decodeTopic(bytes, start, length);
    if (typeof topic !== "string") {
      this.reason = topic.reason;
      return null;
    }
    this.slotTopics[slot] = topic;
    this.lastSlot = slot;
    return topic;
  }
}

/** True when the ASCII `topic` is spelled by bytes[start, start + length). */
function spells(topic: string, bytes: Uint8Array, start: number, length: number): boolean {
  if (topic.length !== length) return false;
  for (let i = 0; i < length; i++) if (topic.charCodeAt(i) !== bytes[start + i]) return false;
  return true;
}

/** The valid topic the bytes spell, or why they do not. */
function decodeTopic(
  bytes: Uint8Array,
  start: number,
  length: number,
): string | { reason: string } {
  if (length > TOPIC_BYTES_MAX)
    return { reason: `topic is ${length} bytes, more than the limit of ${TOPIC_BYTES_MAX}` };
  let text: string;
  try {
    text = utf8.decode(bytes.subarray(start, start + length));
  } catch {
    return { reason: "topic is not valid UTF-8" };
  }
  const reason = validateTopic(text);
  return reason === null ? text : { reason };
}
