/**
 * Every limit of Aria, in one place, each with the reason for its value.
 * Relations between limits are asserted at load, so an edit that breaks one fails at start-up
 * rather than in production. Tests shrink the tunable ones through the options each structure
 * takes (ring capacity, pool blocks), never by editing this file.
 */
import { assert } from "./stdx/assert.ts";

/** Aria's version, printed by `aria version` (package.json's "version"; a test keeps them equal). */
export const ARIA_VERSION = "0.1.0";

// ---- Topics ---------------------------------------------------------------------------------

/** Bytes in a topic name: keeps names short enough to repeat in every persisted record. */
export const TOPIC_BYTES_MAX = 255;
/** Segments in a topic: a deeper tree is a modelling mistake, and depth bounds tree walks. */
export const TOPIC_SEGMENTS_MAX = 32;
/** Segments that name a topic's partition (DESIGN: "the first two segments"). */
export const PARTITION_SEGMENTS = 2;
/** Distinct topics a server interns: topic ids index typed arrays, so they must stay bounded. */
export const TOPICS_MAX = 1 << 22;
/** Entries in one filter: filters are matched per topic id and cached, but parsing is linear. */
export const FILTER_ENTRIES_MAX = 256;

// ---- Tip: ring buffer ----------------------------------------------------------------------

/** Default ring capacity: the tip holds this many bytes of the newest records. */
export const TIP_BYTES_DEFAULT = 256 * 1024 * 1024;
/** Smallest ring: tests use tiny rings to reach wrap-around in a few records. */
export const TIP_BYTES_MIN = 1024;
/**
 * Largest ring: index entries store a record's offset in 8-byte units in a u32,
 * so offsets address up to 32 GiB; 4 GiB keeps one ArrayBuffer within engine limits.
 */
export const TIP_BYTES_MAX = 4 * 1024 * 1024 * 1024 - 8;
/** Records start on this boundary so the f64 header fields read through a Float64Array. */
export const RECORD_ALIGN_BYTES = 8;
/** Ring record header: length u32, topic id u32, seq f64, publish time µs f64 (see ring.ts). */
export const RECORD_HEADER_BYTES = 24;
/** The smallest record: a bare header, for an empty payload. A 32-byte message is ordinary. */
export const RECORD_BYTES_MIN = RECORD_HEADER_BYTES;
/** Largest payload: a record must fit in the smallest ring several times over. */
export const PAYLOAD_BYTES_MAX = 1024 * 1024;
/**
 * Largest properties of one message (opaque bytes kept beside the payload, e.g. an MQTT 5
 * PUBLISH's properties): fits the u16 length field, and far below the frame's 64 KiB margin.
 */
export const PROPERTIES_BYTES_MAX = 8192;

// ---- Tip: block pool and partition indexes -------------------------------------------------

/** Index entries in one pool block (DESIGN: "fixed blocks of 1024 entries"). */
export const INDEX_BLOCK_ENTRIES = 1024;
/**
 * Default page limit of the shared pool (pages of 1,024 entries, cut into 16/64/256/1,024-entry
 * blocks): a full default ring of the smallest records (11 Ki pages) plus one 16-entry block for
 * each of 3.4 Mi cold partitions. The typed arrays (8 KiB of entries per page) are allocated once
 * at the limit; pages never touched cost no resident memory.
 */
export const POOL_BLOCKS_DEFAULT = 64 * 1024;
/** Smallest pool: every partition index needs at least one block to hold an entry. */
export const POOL_BLOCKS_MIN = 2;
/** Partitions a tip indexes: partition ids index typed arrays. */
export const PARTITIONS_MAX = 1 << 20;

// ---- Relations -----------------------------------------------------------------------------

assert(
  RECORD_BYTES_MIN % RECORD_ALIGN_BYTES === 0,
  "the smallest record keeps the next one aligned",
);
assert(RECORD_HEADER_BYTES % RECORD_ALIGN_BYTES === 0, "payload starts aligned");
assert(TIP_BYTES_MIN >= 4 * RECORD_BYTES_MIN, "smallest ring holds several records");
assert(TIP_BYTES_MAX / RECORD_ALIGN_BYTES < 2 ** 32, "ring offsets in 8-byte units fit a u32");
assert(
  TIP_BYTES_DEFAULT >= 4 * (RECORD_HEADER_BYTES + PAYLOAD_BYTES_MAX),
  "default ring holds several largest records",
);
assert(
  POOL_BLOCKS_DEFAULT * INDEX_BLOCK_ENTRIES >= TIP_BYTES_DEFAULT / RECORD_BYTES_MIN,
  "default pool indexes a full default ring",
);
assert(PARTITIONS_MAX <= TOPICS_MAX, "every partition has at least one topic");

// ---- Storage -------------------------------------------------------------------------------

/** Data directory when none is given: embedded, relative to the working directory. */
export const STORE_DIR_DEFAULT = "./aria-data";
/** Store record header: length, crc, seq, time, topic bytes, flags, payload bytes (see store/record.ts). */
export const STORE_RECORD_HEADER_BYTES = 32;
/**
 * Largest persisted record: the largest topic, payload and properties (with their u16 length) a
 * publisher may send, plus the header.
 */
export const STORE_RECORD_BYTES_MAX =
  STORE_RECORD_HEADER_BYTES + TOPIC_BYTES_MAX + PAYLOAD_BYTES_MAX + 2 + PROPERTIES_BYTES_MAX;
/**
 * A journal file rolls at this size: big enough that rolling (one fsync, one create, one directory
 * fsync) is rare, small enough that recovery replays a bounded file.
 */
export const JOURNAL_BYTES_MAX = 64 * 1024 * 1024;
/**
 * Journal bytes kept for messages not yet sorted into segments. Above this, the partitions that
 * pin the oldest journal are closed early (smaller segments) so the journal can be dropped: this
 * bounds journal disk use and the replay work of a restart.
 */
export const JOURNAL_RETAINED_BYTES_MAX = 512 * 1024 * 1024;
/**
 * The store is *backlogged* (the sorter is not keeping up) when its retained journal bytes or its
 * unsorted records pass this many times their budgets (JOURNAL_RETAINED_BYTES_MAX,
 * PENDING_RECORDS_MAX): the broker then stops reading publishers until the sorter is back under.
 * Without it, publishers faster than the sorter grew the journals without end
 * (docs/benchmarks.md#sustained-ingestion-and-back-pressure).
 */
export const STORE_BACKLOG_FACTOR = 2;
/** Bytes of one group-commit write: a flush takes at most this from the append buffer. */
export const JOURNAL_FLUSH_BYTES_MAX = 8 * 1024 * 1024;
/**
 * Written journal chunks kept for the next appends, at most this many bytes (memory held after a
 * burst): a fresh buffer costs a page fault per 4 KiB on first touch (the machine's first-touch
 * cost: docs/benchmarks.md#machine). A 1 KiB-message burst keeps ~40 MiB in flight.
 */
export const JOURNAL_SPARE_BYTES_MAX = 8 * JOURNAL_FLUSH_BYTES_MAX;
/**
 * Journal writes up to this size are made on the event loop's thread (a page-cache copy of a few
 * µs) instead of through the file thread pool, whose round trip costs more and which a segment
 * fsync of the sorter can hold up for tens of milliseconds. Larger writes keep the pool.
 */
export const JOURNAL_WRITE_NOW_BYTES_MAX = 256 * 1024;
/**
 * Drained journals kept as spares for the next generations (store/journal_files.ts), each a
 * journal's size on disk: the sorter drains several journals at once, and with 2 spares every
 * other pair of generations of a steady 64 × 1 `always` load was a fresh file again.
 */
export const JOURNAL_SPARES_MAX = 4;
/**
 * A write the disk refused for lack of space (the journal's, a sort's pack, a manifest append) is
 * tried again after this long, then after twice the last wait: space freed by an operator or by
 * retention is used within a fraction of a second, and a disk that stays full costs one attempt
 * per STORE_RETRY_MS_MAX instead of a busy loop.
 */
export const STORE_RETRY_MS_MIN = 100;
/** The longest wait between two retries of a write refused for lack of space (see above). */
export const STORE_RETRY_MS_MAX = 5000;
/** A partition's open segment closes at this size (Kafka's segment.bytes, smaller). */
export const SEGMENT_BYTES_MAX = 64 * 1024 * 1024;
/** A partition's open segment closes when its oldest message is this old (µs): bounds journal life. */
export const SEGMENT_AGE_US_MAX = 10 * 60 * 1_000_000;
/**
 * Journal records, over all partitions, that may wait unsorted: each costs 40 bytes of in-memory
 * position (seq, time, generation, offset, length). Past it the partitions holding the most are
 * sorted into segments, so small messages at a steady rate do not grow memory until the age limit.
 */
export const PENDING_RECORDS_MAX = 1024 * 1024;
/** The sorter looks for aged partitions (a pass over all of them) at most once per this much publish time (µs). */
export const SEGMENT_AGE_SCAN_US = 1_000_000;
/** One sparse index entry per this many segment bytes (Kafka's index.interval.bytes). */
export const SEGMENT_INDEX_INTERVAL_BYTES = 4096;
/** Files the store keeps open at once (LRU): 100,000 partitions must not exhaust descriptors. */
export const STORE_OPEN_FILES_MAX = 256;
/** Parsed segment indexes kept in memory (LRU): an index is small, re-reading one is a pread. */
export const STORE_INDEXES_CACHED_MAX = 4096;
/** Default fsync period of `--fsync interval` (ms): the most data a crash may lose under it. */
export const FSYNC_INTERVAL_MS_DEFAULT = 50;
/** Read-ahead bytes shared by one reader's partition reads: 10,000 partitions read small chunks. */
export const READ_BUFFER_BYTES_TOTAL = 64 * 1024 * 1024;
/** Smallest read chunk of one partition read: below a page, syscalls dominate. */
export const READ_CHUNK_BYTES_MIN = 16 * 1024;
/** Largest read chunk of one partition read: sequential reads gain little beyond this. */
export const READ_CHUNK_BYTES_MAX = 1024 * 1024;
/** Partition reads of one reader reading at once: disk queue depth, within STORE_OPEN_FILES_MAX. */
export const READ_CONCURRENCY_MAX = 32;
/** Payload bytes one reader batch returns at most: bounds memory of a catch-up read. */
export const READ_BATCH_BYTES_MAX = 4 * 1024 * 1024;
/**
 * Messages one reader batch returns at most: each is an object the collector must reclaim, so
 * a batch of small messages stays young garbage (a byte limit alone allowed ~100,000 objects).
 */
export const READ_BATCH_MESSAGES_MAX = 8192;
/**
 * Topics a disk reader keeps by their stored bytes (read/topic_cache.ts), so a record's topic is
 * not decoded per record: a whole-stream read of 10,000 interleaved topics fits; one of more
 * starts the table again when it is full (a few MB per reader at most).
 */
export const TOPIC_CACHE_ENTRIES_MAX = 16384;
/** The largest span read (one allocation, or one mapping, for many lanes' regions of a pack). */
export const SPAN_BYTES_MAX = 64 * 1024 * 1024;
/**
 * A lane's share of a span, in its read chunks: with 16 KiB chunks (10,000 partitions), whole
 * segments of up to 32 KiB, no more than its chunk and its read-ahead chunk would hold.
 */
export const SPAN_SHARE_CHUNKS = 2;
/**
 * Chunks of a file a lane maps at once: 256 MiB with 1 MiB chunks, so a packed image (at most a
 * 64 MiB segment) maps whole, a large subtree store in pieces (the lane's offsets are int32s).
 */
export const MAPPED_CHUNKS_MAX = 256;
/**
 * Packed images below this are read by a sparse reader without the kernel's read-ahead, which
 * would read neighbouring partitions' images; a larger image gains more from it than it costs.
 */
export const SMALL_IMAGE_BYTES = 4 * 1024 * 1024;
/** A reader is sparse when it reads at most this share of the store's partitions (a 1% subtree). */
export const SPARSE_PARTITIONS_SHARE = 1 / 8;
/** Partition reads from which a dense reader merges on a calendar queue, O(1) a message. */
export const CALENDAR_PARTITIONS_MIN = 256;
/** Partition reads from which a reader decodes span-read images into runs (decoded_runs.ts). */
export const RUN_PARTITIONS_MIN = 256;
/** Manifest records before a compaction is considered: rewriting is O(live segments). */
export const MANIFEST_RECORDS_COMPACT_MIN = 4096;

assert(STORE_RECORD_BYTES_MAX < 2 ** 32, "record length fits a u32");
assert(READ_CHUNK_BYTES_MIN <= READ_CHUNK_BYTES_MAX, "chunk bounds ordered");
assert(
  MAPPED_CHUNKS_MAX * READ_CHUNK_BYTES_MAX < 2 ** 31,
  "a lane's mapped region is addressed by int32 offsets",
);
assert(SPAN_SHARE_CHUNKS * READ_CHUNK_BYTES_MAX <= SPAN_BYTES_MAX, "a lane's share fits a span");
assert(STORE_RECORD_BYTES_MAX <= JOURNAL_FLUSH_BYTES_MAX, "a flush holds the largest record");
assert(JOURNAL_FLUSH_BYTES_MAX <= JOURNAL_BYTES_MAX, "a flush fits a journal");
assert(JOURNAL_BYTES_MAX <= JOURNAL_RETAINED_BYTES_MAX, "at least one full journal is retained");
assert(STORE_RETRY_MS_MIN <= STORE_RETRY_MS_MAX, "retry waits ordered");
assert(SEGMENT_INDEX_INTERVAL_BYTES < SEGMENT_BYTES_MAX, "a segment has several index entries");
assert(STORE_OPEN_FILES_MAX >= 8, "a reader and the writer need a few files at once");
assert(
  READ_CONCURRENCY_MAX * 4 <= STORE_OPEN_FILES_MAX,
  "a reader's concurrent reads leave most of the open-file LRU to others",
);

// ---- Protocol ------------------------------------------------------------------------------

/** Wire protocol version sent in HELLO and WELCOME: bumped on any incompatible layout change. */
export const PROTOCOL_VERSION = 1;
/**
 * Bytes in one frame, header included: one largest message (payload and topic) plus 64 bytes of
 * fixed headers (frame 8, DATA body 8, DATA message 21; exact relation asserted in
 * src/protocol/frame_layout.ts). Kept close to one message so a connection's receive buffer stays small.
 */
export const FRAME_BYTES_MAX = PAYLOAD_BYTES_MAX + 64 * 1024;
/** Messages in one PUBLISH: bounds the work of one sequencing step and the size of one ack range. */
export const PUBLISH_BATCH_MESSAGES_MAX = 8192;
/** Subscriptions one connection may hold: each has merge state the server walks. */
export const SUBSCRIPTIONS_PER_CONNECTION_MAX = 256;
/** Connections a server accepts: each holds a receive buffer and a bounded send buffer. */
export const CONNECTIONS_MAX = 1024;
/**
 * Connections one source address may hold at once: a quarter of CONNECTIONS_MAX, so one address
 * (a flood of idle or half-open connections) cannot take every slot while a few hosts behind one
 * NAT still fit. Loopback is not counted: this machine's own clients may take every slot.
 */
export const CONNECTIONS_PER_ADDRESS_MAX = 256;
/** A connection that sends no HELLO this long after it opened is ended (Broker.expire). */
export const HANDSHAKE_TIMEOUT_US = 10_000_000;
/**
 * A frame that has begun arriving must be whole this long after (Broker.expire ends the
 * connection with a fatal error): a connection cannot hold a part of a frame, and its buffer,
 * forever. Generous: a largest frame at dial-up speed still arrives in time.
 */
export const FRAME_INCOMPLETE_DEADLINE_US = 30_000_000;
/**
 * Bytes of incomplete frames all connections together may hold beyond their first
 * INPUT_CARRY_BYTES_UNCOUNTED each: a connection whose frame would take the server past it gets a
 * fatal FRAME_TOO_LARGE instead of a buffer (1,000 connections each holding most of a largest
 * frame held gigabytes). A few hundred largest frames arriving at once still fit.
 */
export const INPUT_BUFFERED_BYTES_MAX = 256 * 1024 * 1024;
/**
 * Bytes of one connection's incomplete frame that do not count against INPUT_BUFFERED_BYTES_MAX:
 * ordinary frames straddling two reads never meet the budget; CONNECTIONS_MAX of them are bounded.
 */
export const INPUT_CARRY_BYTES_UNCOUNTED = 64 * 1024;
/** A connection closing after a fatal ERROR is ended this long after, read or not (Broker.expire). */
export const CLOSING_LINGER_US = 2_000_000;
/**
 * Bytes the server holds for one connection beyond what its socket took (queued, plus built and
 * not yet handed over). Above this the connection's subscriptions stop, keep a position and catch
 * up later from the tip or disk: a reader that stops reading costs a position, not a copy of the
 * stream. Small, because the kernel's socket buffer (MiBs on Linux) already absorbs a healthy
 * client's bursts. With the queue's chunks and the writer, a stalled subscriber costs the server
 * under 256 KiB (docs/benchmarks.md, stalled readers).
 */
export const CONNECTION_BUFFERED_BYTES_MAX = 128 * 1024;
/**
 * Bytes of frames a session builds before it hands them to its socket, within one event: one
 * commit's fan-out goes out in socket writes of about this size instead of being built whole in
 * the session's writer first (a DATA frame's target size, so a write carries whole frames).
 */
export const CONNECTION_WRITE_BYTES = 64 * 1024;
/**
 * Bytes a connection must take before its client counts as reading without having drained a
 * backlog: more than the kernel's buffers at both ends can hold unread (Linux: tcp_wmem up to
 * 4 MiB, tcp_rmem up to 6 MiB; a loopback socket never read took ~4.2 MB). Catch-up serves such
 * clients, and those that drained, before clients that have not shown they read.
 */
export const READING_SHOWN_BYTES = 16 * 1024 * 1024;
/** Bytes of an auth token in HELLO (u16 length field): room for a JWT, small enough to compare. */
export const AUTH_TOKEN_BYTES_MAX = 1024;
/** Bytes of a client name in HELLO (u8 length field): a label for logs and the admin app. */
export const CLIENT_NAME_BYTES_MAX = 64;
/** Bytes of the reason text of an ERROR frame: longer reasons are cut at a character boundary. */
export const ERROR_REASON_BYTES_MAX = 1024;

assert(
  FRAME_BYTES_MAX >= PAYLOAD_BYTES_MAX + TOPIC_BYTES_MAX + 64,
  "a frame holds one largest message with its headers",
);
assert(FRAME_BYTES_MAX < 2 ** 32, "frame length fits the u32 header field");
assert(
  INPUT_BUFFERED_BYTES_MAX >= 64 * FRAME_BYTES_MAX,
  "the input budget holds many largest frames at once",
);
assert(TOPIC_BYTES_MAX <= 255, "topic length fits the u8 field of a message");
assert(
  CONNECTION_WRITE_BYTES <= CONNECTION_BUFFERED_BYTES_MAX / 2,
  "a session hands frames to its socket well before it counts as backed up",
);
assert(
  AUTH_TOKEN_BYTES_MAX <= 0xffff && ERROR_REASON_BYTES_MAX <= 0xffff,
  "lengths fit u16 fields",
);
assert(CLIENT_NAME_BYTES_MAX <= 255, "client name length fits a u8 field");
assert(SUBSCRIPTIONS_PER_CONNECTION_MAX <= 2 ** 32 - 1, "limits fit WELCOME's u32 fields");
assert(FILTER_ENTRIES_MAX <= 0xffff, "filter entry count fits SUBSCRIBE's u16 field");
/** Bytes of a durable consumer's name in SUBSCRIBE (u8 length field): a label, like a client name. */
export const CONSUMER_NAME_BYTES_MAX = 64;
/**
 * Durable consumers a server keeps: each costs a record in memory and in the consumers file, and
 * `GET /api/consumers` lists them all; an MQTT door makes one per persistent subscription.
 */
export const CONSUMERS_MAX = 10_000;
/**
 * Milliseconds between writes of the consumers file: acknowledged positions are written in
 * batches, not one write per ACK; after a crash a consumer resumes at most this much behind.
 */
export const CONSUMERS_WRITE_INTERVAL_MS = 200;
assert(CONSUMER_NAME_BYTES_MAX <= 255, "a consumer name's length fits SUBSCRIBE's u8 field");

// ---- Broker --------------------------------------------------------------------------------

/**
 * Bytes of messages one subscription may write in one catch-up slice before the others get a
 * turn: a reader far behind cannot starve the rest, and a slice still fills several DATA frames.
 */
export const CATCH_UP_SLICE_BYTES = 256 * 1024;
/**
 * Bytes of a subscription's first catch-up slice, and of its disk reader's first batch: built in
 * the event that subscribed it and written with SUBSCRIBED, so the first message leaves at once
 * rather than after a full slice (a turn of the event loop, a 64 KiB frame) or a full batch.
 */
export const CATCH_UP_FIRST_SLICE_BYTES = 4 * 1024;
/**
 * Bytes of DATA one event builds for all sessions together — a commit's live fan-out, a round of
 * catch-up — before the rest waits for the next turn of the event loop (the subscriptions not
 * reached go on from the tip): a thousand subscribers of one large commit would otherwise hold
 * the loop, and every other client, for seconds. A few ms of copying and socket writes.
 */
export const DELIVERY_EVENT_BYTES_MAX = 4 * 1024 * 1024;
/**
 * Stalled disk-phase subscriptions that keep their reader and the rest of its batch, so a slow
 * client resumes where it stopped instead of re-reading (and re-checking) every partition's
 * chunk from disk. Past this many, a stall drops its reader: memory stays bounded however many
 * subscribers stall.
 */
export const STALLED_DISK_READERS_KEPT_MAX = 2;
/**
 * Disk readers all subscriptions hold at once, stalled ones' included: each holds its read-ahead
 * and a batch (up to READ_BATCH_BYTES_MAX), so a thousand subscriptions reading from disk at once
 * held gigabytes. Past this, a subscription's disk phase waits for a slot, holding its position.
 */
export const DISK_READERS_MAX = 8;
/**
 * Of DISK_READERS_MAX, the readers subscriptions of clients that have not shown they read
 * (Session.showsReading) may hold: a thousand subscribers that never read went through every slot
 * in turn, each reading a batch its client would never take, while a healthy one waited its turn.
 */
export const DISK_READERS_UNSHOWN_MAX = 2;
/**
 * Bytes of one batch of a subscription's disk reader: one catch-up slice, as from the tip. The
 * batch is what a stalled subscription's reader holds, with the read buffers its payloads point
 * into: with the store's 4 MiB batches a reader of `**` over 16 partitions whose records were
 * still in the journal read and held ~84 MB (docs/benchmarks.md, stalled readers).
 */
export const CATCH_UP_READ_BATCH_BYTES = CATCH_UP_SLICE_BYTES;
/**
 * Read-ahead bytes a subscription's disk reader shares among its partition reads (the store's
 * readers share READ_BUFFER_BYTES_TOTAL): a subscriber takes a slice at a time, and a reader of
 * few partitions still reads READ_CHUNK_BYTES_MAX at once.
 */
export const CATCH_UP_READ_BUFFER_BYTES = 4 * 1024 * 1024;
/**
 * Resident bytes a server may grow by, from its low since the last full collection, before its
 * once-a-second garbage hint becomes a full collection (runtime/garbage_hint.ts): freed buffers
 * of a burst (a thousand subscribers that never read) went back to the OS only then.
 */
export const GC_FULL_GROWTH_BYTES = 128 * 1024 * 1024;
/**
 * Connections closed since the last full collection at which the garbage hint runs one: what
 * they held (send queues, writers, readers) is garbage, and an idle server would not collect it.
 */
export const GC_FULL_CLOSED_CONNECTIONS = 256;
/**
 * How often a server runs segment aging and retention (ms): far finer than their limits need
 * (segments age in minutes, SEGMENT_AGE_US_MAX), coarse enough that the pass is rare.
 */
export const MAINTENANCE_INTERVAL_MS = 1000;

assert(
  DISK_READERS_UNSHOWN_MAX <= DISK_READERS_MAX / 4,
  "clients that have not shown they read leave most disk reader slots to those that have",
);
assert(
  STALLED_DISK_READERS_KEPT_MAX <= DISK_READERS_MAX / 4,
  "stalled subscriptions leave most disk reader slots to those that read",
);
assert(
  DELIVERY_EVENT_BYTES_MAX >= 4 * CATCH_UP_SLICE_BYTES,
  "a round of catch-up serves several subscriptions",
);
assert(
  CATCH_UP_READ_BATCH_BYTES >= CATCH_UP_SLICE_BYTES &&
    CATCH_UP_READ_BUFFER_BYTES >= 4 * READ_CHUNK_BYTES_MAX,
  "a catch-up batch fills a slice; a reader of up to four partitions reads whole chunks",
);
assert(
  CATCH_UP_SLICE_BYTES >= CONNECTION_WRITE_BYTES,
  "a catch-up slice fills at least one socket write",
);

// ---- Shared groups (src/broker/shared_group.ts) ---------------------------------------------

/**
 * Messages one member of a shared group holds unacknowledged: a member at its window takes no
 * more (its topics wait rather than move, which keeps per-topic order). Wide enough that a member
 * acknowledging once per DATA frame is not held to a round trip per window: with 1,024 a group
 * of one member read a backlog of small messages 8.6x slower than a durable consumer, ~1x with
 * 8,192 (docs/benchmarks.md, shared groups).
 */
export const GROUP_MEMBER_INFLIGHT_MAX = 8192;
/**
 * Messages a group's cursor holds read but not yet given to a member (their member is at its
 * window, or their topic waits for a rebalance): the cursor stops reading beyond them.
 */
export const GROUP_PENDING_MAX = 16_384;
/**
 * Payload bytes one member holds unacknowledged: the group keeps a copy of each in-flight message
 * (a member that leaves gives them back), so this bounds that memory; one message always fits.
 */
export const GROUP_MEMBER_INFLIGHT_BYTES_MAX = 1024 * 1024;
/** Payload bytes of a group's pending messages (copies) beyond which its cursor stops reading. */
export const GROUP_PENDING_BYTES_MAX = 4 * 1024 * 1024;
/**
 * Unacknowledged seqs a shared group's stored record lists (written when its last member leaves
 * or the server stops), so a restart delivers only those again: 128 KiB at most per record; a
 * group holding more stores its lowest unacknowledged seq only (then more comes again).
 */
export const GROUP_POSITION_SEQS_MAX = 16_384;

assert(GROUP_MEMBER_INFLIGHT_MAX >= 1 && GROUP_PENDING_MAX >= 1, "a group can hold a message");
assert(
  GROUP_MEMBER_INFLIGHT_BYTES_MAX >= 1 && GROUP_PENDING_BYTES_MAX >= 1,
  "a group can hold a message's bytes",
);

// ---- Command line ---------------------------------------------------------------------------

/** Bytes of a config file (`aria serve --config`): a few hundred settings at most. */
export const CONFIG_FILE_BYTES_MAX = 1024 * 1024;

// ---- Split ----------------------------------------------------------------------------------

/** Bytes of a volume table file (`split plan --volumes`): ~250 bytes a row for SPLIT_TOPICS_MAX rows. */
export const SPLIT_VOLUMES_FILE_BYTES_MAX = 256 * 1024 * 1024;
/**
 * Topics in one volume table: planning is O(n log n) with ~0.3 s per 100,000 topics, so a table at
 * the limit plans in seconds; per-topic arrays of this length stay a few MiB.
 */
export const SPLIT_TOPICS_MAX = 1 << 20;
/**
 * Bytes of one topic and of a whole table: a safe integer, so sums of bytes are exact.
 * Waste totals ((n - 1) x bytes per store) may pass 2^53 and are then rounded doubles.
 */
export const SPLIT_VOLUME_BYTES_MAX = Number.MAX_SAFE_INTEGER;
/** Segments that name a store under the `heuristic` planner (the old rule: the first three). */
export const SPLIT_HEURISTIC_SEGMENTS = 3;
/** Bytes of a store id: a file name (255 on common file systems) with room for a suffix. */
export const SPLIT_STORE_ID_BYTES_MAX = 200;

assert(SPLIT_TOPICS_MAX <= TOPICS_MAX, "a planned table fits the topics a server interns");
assert(
  SPLIT_HEURISTIC_SEGMENTS > PARTITION_SEGMENTS,
  "a heuristic store lies inside one partition",
);
assert(SPLIT_STORE_ID_BYTES_MAX >= 64, "store ids keep a readable prefix");

// ---- Admin ----------------------------------------------------------------------------------

/** Subscriptions `/metrics` lists by lag (aria_subscription_lag_seqs), furthest behind first. */
export const METRICS_LAGS_MAX = 10;

/** Characters of a label value made from client input (a filter), beyond which it is cut. */
export const METRICS_LABEL_CHARS_MAX = 200;

/** Address the admin app listens on unless told: this machine only, whatever `--host` the protocol uses. */
export const ADMIN_HOST_DEFAULT = "127.0.0.1";
/** Bytes of a volume table uploaded to the admin app: ~100k rows; bigger tables go to `aria split plan`. */
export const ADMIN_VOLUMES_BODY_BYTES_MAX = 8 * 1024 * 1024;
/**
 * Topics the admin app plans: planning runs on a worker thread, but its memory and time grow with
 * the table (a compare of 100,000 topics answers ~9 MB of JSON); bigger tables go to the CLI.
 */
export const ADMIN_SPLIT_TOPICS_MAX = 100_000;
/**
 * Body of POST /internal/split/commit: a split's swap lists every topic of the partitions it
 * rewrote with its counts, ~90 bytes a topic (9.0 MB for 100,000 topics, measured): room for
 * ~700,000, under the HTTP server's own 128 MiB cap on any request.
 */
export const ADMIN_COMMIT_BODY_BYTES_MAX = 64 * 1024 * 1024;
/** Body of the admin routes that take a small JSON object or nothing (reserve, seal): ~20 bytes. */
export const ADMIN_SMALL_BODY_BYTES_MAX = 1024;
/**
 * Worker threads that plan for the admin app (fewer where the machine has fewer cores to spare):
 * planning is occasional, and each thread holds a table and its plans while it works.
 */
export const ADMIN_PLAN_WORKERS_MAX = 2;
/** Plan and compare requests waiting for a worker; beyond them the app answers 503 at once. */
export const ADMIN_PLAN_QUEUE_MAX = 4;
/** Retry-After of that 503: about one compare of the largest table the app plans. */
export const ADMIN_PLAN_RETRY_AFTER_SECONDS = 2;
/** Levels of the topic tree one /api/topics answer holds below its prefix: the UI fetches one at a time. */
export const ADMIN_TREE_DEPTH_MAX = 8;
/** Children listed per node of /api/topics (the largest): a page a person can scan, a bounded answer. */
export const ADMIN_TREE_CHILDREN_MAX = 500;
/** Partitions with their own label in /metrics; the rest are summed: bounded series per scrape. */
export const ADMIN_METRICS_PARTITIONS_MAX = 20;
/** The window publish rates are measured over: smooth enough to read, short enough to follow a burst. */
export const ADMIN_RATE_WINDOW_MS = 5000;
/** Samples kept for rates: one per window / samples at most, so polling faster costs no memory. */
export const ADMIN_RATE_SAMPLES_MAX = 20;

assert(
  ADMIN_VOLUMES_BODY_BYTES_MAX <= SPLIT_VOLUMES_FILE_BYTES_MAX,
  "an upload is a valid volume table file",
);
assert(ADMIN_SPLIT_TOPICS_MAX <= SPLIT_TOPICS_MAX, "the admin app plans only valid tables");
assert(
  ADMIN_VOLUMES_BODY_BYTES_MAX <= ADMIN_COMMIT_BODY_BYTES_MAX,
  "a commit may list what an upload can",
);
assert(ADMIN_PLAN_WORKERS_MAX >= 1 && ADMIN_PLAN_QUEUE_MAX >= 1, "planning can run and wait");
assert(ADMIN_TREE_DEPTH_MAX <= TOPIC_SEGMENTS_MAX, "a tree is no deeper than a topic");
assert(ADMIN_RATE_SAMPLES_MAX >= 2, "a rate needs two samples");
