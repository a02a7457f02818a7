/**
 * decoded_runs: tables of the records of span reads, and the runs of them a merge over many
 * partition reads takes without going through each partition read's objects; the message
 * objects a borrowing read hands out.
 *
 * A merge of thousands of partitions takes each message from another partition read. Going
 * through it for each (partition read, lane, file meta, buffer, view, topic string, the record's
 * header) reached every one of those out of cache, and the record headers one after the other (each
 * record's length says where the next one starts), whatever the pages (mapped, anonymous,
 * transparent huge pages; figures: docs/benchmarks.md#design-notes-figures-moved-from-code-comments). The same records walked in file order, as a span read
 * lands, stream through the caches. So a span read tabulates each whole image it brought (its
 * records CRC matched) in one pass: seq, publish time, offset and payload length of every
 * record, in flat typed arrays, when the image holds one topic and its records are well formed
 * and in seq order (else no table: the lane reads it record by record, which reports what is
 * wrong). A lane whose head lies in a tabulated image hands the merge the rest of the image as a
 * run; the merge takes its messages from the table until the run ends.
 *
 * Owns no I/O. A table's bytes are the span read's (a mapping, or a buffer of its own), alive as
 * long as the table is referenced; a lane whose region of them is refilled in place (a copying
 * reader's next read) drops its table first. Invariants: a run's seqs strictly increase and are at most the
 * limit of the batch that made it; the lane's state is the state after its run, so a run not
 * taken to its end is rewound (the lane set back to its first record not taken) before anything
 * else asks the lane.
 */
import {
  RECORD_PAYLOAD_BYTES_OFFSET,
  RECORD_TOPIC_BYTES_OFFSET,
  RECORD_TOPIC_OFFSET,
  type StoredMessage,
  checkRecordLength,
  recordPropertiesBytes,
  recordSeq,
  recordTime,
} from "./record.ts";

const EMPTY = new Uint8Array(0);

/**
 * A message of a borrowing read: the reader reuses these objects from batch to batch (valid,
 * like the bytes they point into, until the next `nextBatch()`), so a catch-up read allocates
 * nothing per message. `payload` builds a view only when asked.
 */
export class BorrowedMessage {
  seq = 0;
  timeUs = 0;
  topic = "";
  /** The topic's bytes (ASCII), shared by the reader's messages of that topic: not to be changed. */
  topicUtf8: Uint8Array = EMPTY;
  source: Uint8Array = EMPTY;
  start = 0;
  length = 0;
  /** The properties are source[propertiesStart, + propertiesBytes) (0 bytes: none). */
  propertiesStart = 0;
  propertiesBytes = 0;

  get payload(): Uint8Array {
    return this.source.subarray(this.start, this.start + this.length);
  }

  /** The properties as a view of the buffer, or undefined when the message has none. */
  get properties(): Uint8Array | undefined {
    if (this.propertiesBytes === 0) return undefined;
    return this.source.subarray(this.propertiesStart, this.propertiesStart + this.propertiesBytes);
  }

  /** Lets go of the buffer (a slot no batch uses now: see StoreReader.nextBatch). */
  release(): void {
    this.source = EMPTY;
    this.length = 0;
    this.propertiesBytes = 0;
  }
}

/**
 * A seq read back from a Float64Array, as the record codec hands seqs out (getU64): an int32
 * when it fits one, so that code optimized for int32 seqs does not leave optimized code for it.
 */
export function asSeq(value: number): number {
  return value <= 0x7fffffff ? value | 0 : value;
}

/** The records of the tabulated images of one span read (`bytes`, whose byte 0 is file offset `base`). */
export class RecordTable {
  count = 0;
  seqs: Float64Array;
  times: Float64Array;
  /** Offset in `bytes` of each record. */
  offsets: Int32Array;
  payloadBytes: Int32Array;
  /** Properties bytes of each record (0: none); they follow its payload. */
  propertiesBytes: Int32Array;
  /** A view of `bytes`, one per table: tabulating an image builds none. */
  private readonly view: DataView;

  constructor(
    readonly bytes: Uint8Array,
    readonly base: number,
    capacity: number,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    this.seqs = new Float64Array(capacity);
    this.times = new Float64Array(capacity);
    this.offsets = new Int32Array(capacity);
    this.payloadBytes = new Int32Array(capacity);
    this.propertiesBytes = new Int32Array(capacity);
  }

  /**
   * Appends the records of bytes[start, end) (one image's records, checked as a whole) and
   * returns the index of the first, or -1 (nothing appended) unless they all are well formed,
   * have one topic and strictly increasing seqs, and fill the range exactly.
   */
  tabulate(from: number, to: number): number {
    // `| 0`: offsets reach the DataView as int32s; at a double offset (a span's positions are
    // doubles once any file position was) every read left optimized code ("Uncountable" exits:
    // ~2 million per whole-stream read over 10,000 partitions, 3x slower).
    const start = from | 0;
    const end = to | 0;
    const bytes = this.bytes;
    const view = this.view;
    const first = this.count;
    let count = first;
    let at = start;
    let seq = -1;
    const topicBytes =
      end - at >= RECORD_TOPIC_OFFSET ? view.getUint16(at + RECORD_TOPIC_BYTES_OFFSET, true) : 0;
    while (at < end) {
      const length = checkRecordLength(view, at, end);
      if (length <= 0 || view.getUint16(at + RECORD_TOPIC_BYTES_OFFSET, true) !== topicBytes)
        return -1;
      const next = recordSeq(view, at);
      if (next <= seq) return -1;
      for (let i = 0; i < topicBytes; i++)
        if (bytes[at + RECORD_TOPIC_OFFSET + i] !== bytes[start + RECORD_TOPIC_OFFSET + i])
          return -1;
      if (count === this.seqs.length) this.grow();
      this.seqs[count] = next;
      this.times[count] = recordTime(view, at);
      this.offsets[count] = at;
      this.payloadBytes[count] = view.getUint32(at + RECORD_PAYLOAD_BYTES_OFFSET, true);
      this.propertiesBytes[count] = recordPropertiesBytes(view, at);
      count++;
      seq = next;
      at += length;
    }
    if (count === first) return -1;
    this.count = count;
    return first;
  }

  /** Index in [from, to) of the record at offset `at` of `bytes` (one of them). */
  indexOf(at: number, from: number, to: number): number {
    let lo = from;
    let hi = to - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.offsets[mid] < at) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private grow(): void {
    const size = Math.max(64, this.seqs.length * 2);
    this.seqs = grown(this.seqs, new Float64Array(size));
    this.times = grown(this.times, new Float64Array(size));
    this.offsets = grown(this.offsets, new Int32Array(size));
    this.payloadBytes = grown(this.payloadBytes, new Int32Array(size));
    this.propertiesBytes = grown(this.propertiesBytes, new Int32Array(size));
  }
}

/** `into` (a larger array) holding `from`'s values at its start. */
function grown<T extends Float64Array | Int32Array>(from: T, into: T): T {
  into.set(from);
  return into;
}

/** An image of a table as a lane holds it: its records are table indexes [first, end); `shift`: offset in the table's bytes of the lane's buffer. */
export type TabledImage = { table: RecordTable; shift: number; first: number; end: number };

/** Per merge source (partition read index), the run of table records it yields next. */
export class DecodedRuns {
  readonly capacity: number;
  private readonly tables: (RecordTable | null)[];
  /** Per source: table index of its next record and the end of its run (equal: none). */
  private readonly nextOf: Int32Array;
  private readonly endOf: Int32Array;
  private readonly topics: string[];
  private readonly topicUtf8: Uint8Array[];
  private readonly topicBytes: Int32Array;
  /** Payload plus topic bytes of the record the last take returned (a batch's byte count). */
  lastBytes = 0;

  constructor(capacity: number) {
    this.capacity = capacity;
    this.tables = new Array<RecordTable | null>(capacity).fill(null);
    this.nextOf = new Int32Array(capacity);
    this.endOf = new Int32Array(capacity);
    this.topics = new Array<string>(capacity).fill("");
    this.topicUtf8 = new Array<Uint8Array>(capacity).fill(EMPTY);
    this.topicBytes = new Int32Array(capacity);
  }

  /** True when `source` has records of its run not yet taken. */
  pending(source: number): boolean {
    return this.nextOf[source] < this.endOf[source];
  }

  /** Seq of the next record of the run of `source` (pending only). */
  headSeq(source: number): number {
    return asSeq((this.tables[source] as RecordTable).seqs[this.nextOf[source]]);
  }

  /**
   * Makes records [first, end) of `table`, all of topic `topic` (its bytes `topicUtf8`), the run
   * of `source`.
   */
  begin(
    source: number,
    table: RecordTable,
    first: number,
    end: number,
    topic: string,
    topicUtf8: Uint8Array,
  ): void {
    this.tables[source] = table;
    this.nextOf[source] = first;
    this.endOf[source] = end;
    this.topics[source] = topic;
    this.topicUtf8[source] = topicUtf8;
    this.topicBytes[source] = topicUtf8.length;
  }

  /** Takes the next record of the run of `source` (pending only): into `into`, or as a copy. */
  take(source: number, into: BorrowedMessage | null): StoredMessage {
    const table = this.tables[source] as RecordTable;
    const i = this.nextOf[source];
    this.nextOf[source] = i + 1;
    const topicBytes = this.topicBytes[source];
    const start = table.offsets[i] + RECORD_TOPIC_OFFSET + topicBytes;
    const length = table.payloadBytes[i];
    const propertiesBytes = table.propertiesBytes[i];
    this.lastBytes = length + topicBytes;
    if (into === null) {
      const message: StoredMessage = {
        seq: asSeq(table.seqs[i]),
        timeUs: table.times[i],
        topic: this.topics[source],
        payload: table.bytes.slice(start, start + length),
      };
      if (propertiesBytes !== 0)
        message.properties = table.bytes.slice(start + length, start + length + propertiesBytes);
      return message;
    }
    into.propertiesStart = start + length;
    into.propertiesBytes = propertiesBytes;
    into.seq = asSeq(table.seqs[i]);
    into.timeUs = table.times[i];
    into.topic = this.topics[source];
    into.topicUtf8 = this.topicUtf8[source];
    into.source = table.bytes;
    into.start = start;
    into.length = length;
    return into;
  }

  /** File offset of the next record of the run of `source` (pending only): where its lane is set back to. */
  headPosition(source: number): number {
    const table = this.tables[source] as RecordTable;
    return table.base + table.offsets[this.nextOf[source]];
  }

  /** Drops the rest of the run of `source` (after its lane was set back to its next record). */
  clear(source: number): void {
    this.endOf[source] = this.nextOf[source];
    this.tables[source] = null;
  }
}
