/**
 * span_read: one read for the regions of many lanes that lie back to back in one pack.
 *
 * A sorter batch writes the segments of many partitions side by side, and a read of many
 * partitions wants them all at once, so lanes about to read such regions are served by one read
 * (or mapping) of the whole run, each taking a view of its region:
 *
 *   pack:  [hdr|A records|A index][hdr|B records|B index][hdr|C records|C index]
 *   span:      |<--------------- one read or mapping, ≤ SPAN_BYTES_MAX --------->|
 *   lanes:      A: view        B: view          C: view       (acceptSpan)
 *
 * Over 10,000 partitions this replaces thousands of small reads, and their buffers, by a few
 * large ones. A span only read ahead for is started and not waited for (`prefetch`): each of its
 * lanes holds `aheadRead` until it lands. Memory and timing figures behind these choices:
 * docs/benchmarks.md#storage-issue-3 (reader design notes).
 *
 * Knows lanes only as SpanTaker (the two members it calls), so lanes and this file import in one
 * direction. Does not decide which regions a lane wants (Lane.spanWant does).
 * Invariant: a span joins B after A only when A.next = B.imageStart and B starts from its
 * image's first record: what lies between them is A's index image and B's header, never another
 * segment's records.
 */
import { READ_CONCURRENCY_MAX, SPAN_BYTES_MAX } from "../../constants.ts";
import { forEachConcurrently } from "../../stdx/concurrently.ts";
import type { StoreContext } from "../context.ts";
import { RecordTable, type TabledImage } from "../decoded_runs.ts";
import { readChunk } from "./file_access.ts";

/**
 * What a span read needs of a lane: it hands over the lane's region, and marks a read ahead in
 * flight.
 */
export interface SpanTaker {
  /**
   * A span read in flight that sets the lane's read-ahead chunk when it lands; it never rejects.
   */
  aheadRead: Promise<void> | null;
  /**
   * Takes `bytes` (file bytes from `position` of `path`, a view of a span read) for the region
   * the lane asked for; `checked`: they are a whole image's records and matched its records CRC.
   */
  acceptSpan(
    path: string,
    position: number,
    bytes: Uint8Array,
    ahead: boolean,
    checked: boolean,
    tabled: TabledImage | null,
  ): void;
}

/**
 * A lane's region [position, end) of a pack, to be read together with its neighbours'.
 * `imageStart`: where its segment's image starts; `fromStart`: the region starts at the image's
 * first record; `next`: where the pack's next image starts, when the region runs to the end of
 * its segment (else -1); `ahead`: only a read ahead (nothing waits for it). `recordsCrc`: the
 * CRC-32 of the region's records when the region is a whole packed image, else -1.
 */
export type SpanRequest = {
  lane: SpanTaker;
  path: string;
  position: number;
  end: number;
  ahead: boolean;
  fromStart: boolean;
  imageStart: number;
  next: number;
  recordsCrc: number;
};

/**
 * Groups `requests` into spans and reads them: a span some lane needs now is read and waited
 * for (at most READ_CONCURRENCY_MAX at once); a span only read ahead for is started and not
 * waited for — unless file removals wait for the reads in flight (`context.reads.deferred`): reads
 * ahead outlive batches, and a long read that kept one in flight at all times would hold
 * removals (drained journals, retention) off for as long as it ran; its lanes read ahead later,
 * when low on data. `tabulate`: whole images are tabulated for runs (a merge of many partitions).
 * Returns the spans started ahead.
 */
export async function readSpans(
  context: StoreContext,
  requests: SpanRequest[],
  tabulate: boolean,
): Promise<number> {
  if (requests.length < 2) return 0;
  requests.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.position - b.position));
  const spans: SpanRequest[][] = [];
  for (let i = 0; i < requests.length; ) {
    let j = i + 1;
    while (
      j < requests.length &&
      requests[j].path === requests[i].path &&
      requests[j].fromStart &&
      requests[j].imageStart === requests[j - 1].next &&
      requests[j].end - requests[i].position <= SPAN_BYTES_MAX
    ) {
      j++;
    }
    if (j - i > 1) spans.push(requests.slice(i, j));
    i = j;
  }
  // A lane that reaches its next file before its span lands waits for it then (Lane.aheadRead):
  // waiting here instead left the merge idle (docs/benchmarks.md#storage-issue-3).
  let startedAhead = 0;
  const needed: SpanRequest[][] = [];
  for (const span of spans) {
    if (span.some((request) => !request.ahead)) needed.push(span);
    else if (context.reads.deferred.length === 0) {
      prefetch(context, span, tabulate);
      startedAhead++;
    }
  }
  await forEachConcurrently(needed.length, READ_CONCURRENCY_MAX, (k) =>
    readSpan(context, needed[k], tabulate),
  );
  return startedAhead;
}

/**
 * Reads `span` (requests back to back in one pack) at once; each lane takes a view of its region.
 * Where the disk maps files (`DiskFile.map`; packs are never written again) the views are of
 * the mapped region, its pages in the page cache: no buffer, no copy, no page faults of fresh
 * memory. A whole image's records are checked here, against its records CRC, as soon as they
 * land, while the reader often still waits for other spans, rather than at each lane's first
 * record, where it held back the merge's start (docs/benchmarks.md#storage-issue-3).
 */
async function readSpan(
  context: StoreContext,
  span: readonly SpanRequest[],
  tabulate: boolean,
): Promise<void> {
  const start = span[0].position;
  const end = span[span.length - 1].end;
  let bytes = await context.files.with(span[0].path, (file) =>
    file.map === undefined ? null : file.map(start, end - start),
  );
  if (bytes === null) {
    bytes = new Uint8Array(end - start);
    await readChunk(context, span[0].path, start, bytes, end);
  } else {
    context.reads.bytesRead += bytes.length;
  }
  // Whole images that match their records CRC are tabulated for runs, the records walked in file
  // order as they land (see decoded_runs.ts); `tabulate`: for a merge of many partitions (runs).
  const table = tabulate ? new RecordTable(bytes, start, Math.ceil((end - start) / 1024)) : null;
  for (const request of span) {
    const from = request.position - start;
    const to = request.end - start;
    const region = bytes.subarray(from, to);
    const checked = request.recordsCrc !== -1 && context.crc32(region) === request.recordsCrc;
    let tabled: TabledImage | null = null;
    if (checked && table !== null) {
      const first = table.tabulate(from, to);
      if (first >= 0) tabled = { table, shift: from, first, end: table.count };
    }
    request.lane.acceptSpan(request.path, request.position, region, request.ahead, checked, tabled);
  }
}

/**
 * Starts reading `span`, whose requests are all reads ahead, without waiting: each lane's
 * `aheadRead` until it lands. It counts as a read in flight (files stay until it ends) and the
 * store's close waits for it. A failure only leaves the lanes without their read ahead: each then
 * reads its next file itself, where an error is reported.
 */
function prefetch(context: StoreContext, span: readonly SpanRequest[], tabulate: boolean): void {
  context.reads.inFlight++;
  const done = readSpan(context, span, tabulate)
    .catch(() => {})
    .then(() => {
      for (const request of span)
        if (request.lane.aheadRead === done) request.lane.aheadRead = null;
      context.reads.prefetches.delete(done);
      // A removal that fails here leaves an orphan file the next open removes.
      return context.reads.done().catch(() => {});
    });
  context.reads.prefetches.add(done);
  for (const request of span) request.lane.aheadRead = done;
}
