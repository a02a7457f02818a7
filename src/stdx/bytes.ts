/**
 * bytes: copying a byte range between buffers without allocating. `dst.set(src.subarray(..))`
 * builds a view object per call, which on per-message paths (frames, segment records) is young
 * garbage at the message rate; short ranges are copied by an unrolled loop instead, which is
 * faster up to about 100 bytes (figures:
 * docs/benchmarks.md#design-notes-figures-moved-from-code-comments).
 */

/** Ranges up to this many bytes are copied by the loop. */
export const COPY_LOOP_BYTES_MAX = 96;

/** Copies src[start, start + length) to dst at `at`. */
export function copyBytes(
  dst: Uint8Array,
  at: number,
  src: Uint8Array,
  start: number,
  length: number,
): void {
  if (length > COPY_LOOP_BYTES_MAX) {
    dst.set(start === 0 && length === src.length ? src : src.subarray(start, start + length), at);
    return;
  }
  let i = 0;
  for (; i + 4 <= length; i += 4) {
    dst[at + i] = src[start + i];
    dst[at + i + 1] = src[start + i + 1];
    dst[at + i + 2] = src[start + i + 2];
    dst[at + i + 3] = src[start + i + 3];
  }
  for (; i < length; i++) dst[at + i] = src[start + i];
}

/**
 * Ranges up to this many bytes are copied four bytes at a time through DataViews by
 * copyBytesViews; longer ones by `set()`, which is faster past this length (figures:
 * docs/benchmarks.md#design-notes-figures-moved-from-code-comments).
 */
export const COPY_VIEWS_BYTES_MAX = 128;

/**
 * copyBytes for a caller that holds a DataView over exactly `dst` and a ViewCache for its
 * sources: a short range moves as int32 words through the views, at any alignment (little-endian
 * on both sides, so the bytes are the same on any host); a long one goes to copyBytes, which
 * builds no view of a whole array (nor does `sources`, asked only for short ranges).
 */
export function copyBytesViews(
  dst: Uint8Array,
  dstView: DataView,
  at: number,
  src: Uint8Array,
  sources: ViewCache,
  start: number,
  length: number,
): void {
  if (length > COPY_VIEWS_BYTES_MAX) {
    copyBytes(dst, at, src, start, length);
    return;
  }
  const srcView = sources.of(src);
  let i = 0;
  for (; i + 8 <= length; i += 8) {
    dstView.setInt32(at + i, srcView.getInt32(start + i, true), true);
    dstView.setInt32(at + i + 4, srcView.getInt32(start + i + 4, true), true);
  }
  for (; i < length; i++) dst[at + i] = src[start + i];
}

/**
 * The DataView of the last array asked for: a caller copying many ranges out of one array (the
 * messages of one PUBLISH frame) builds one view per array, not one per range.
 */
export class ViewCache {
  private source: Uint8Array | null = null;
  private view: DataView = new DataView(new ArrayBuffer(0));

  /** A DataView over exactly `bytes`. */
  of(bytes: Uint8Array): DataView {
    if (bytes !== this.source) {
      this.source = bytes;
      this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    return this.view;
  }
}
