/**
 * files: whole-file reads for commands that take an input file (`split plan --volumes`), over
 * node:fs as Bun implements it (deno_runtime.ts reads through Deno's, sharing `readWholeFile`).
 * Owns turning file-system errors into one-line reasons; a file above the caller's size limit is
 * refused before any byte is read, a stream (a pipe, a device) once it passes the limit. Never throws for an expected failure (missing, unreadable,
 * a directory, too big): returns the reason.
 */
import { promises as fs } from "node:fs";

import type { ReadBytesResult } from "./runtime.ts";

/** A file's text, or why it could not be read. */
export type ReadTextResult = { ok: true; text: string } | { ok: false; reason: string };

const ERRNO_REASONS: Record<string, string> = {
  ENOENT: "no such file",
  EACCES: "permission denied",
  EPERM: "permission denied",
  EISDIR: "is a directory",
  ENOTDIR: "a parent is not a directory",
  ELOOP: "too many symbolic links",
  ENAMETOOLONG: "name too long",
};

/** A path's kind and size. */
export type FileStat = (path: string) => Promise<{ isDirectory: boolean; size: number }>;

/** Read in pieces of this size: a stream (a pipe, `/dev/zero`) is cut at the limit, not read whole. */
const READ_PIECE_BYTES = 64 * 1024;

/**
 * Reads all of `path`, refusing a directory or a file whose size is over `bytesMax` before any
 * byte is read, and a stream that goes on past `bytesMax` (a pipe, a device: their size says
 * nothing) once it has; the one-line reason when it cannot. `stat` is the runtime's (node:fs
 * otherwise); the bytes are read through node:fs, which Bun and Deno both implement.
 */
export async function readWholeFile(
  path: string,
  bytesMax: number,
  stat: FileStat = nodeStat,
): Promise<{ ok: true; value: Uint8Array } | { ok: false; reason: string }> {
  const where = `cannot read ${JSON.stringify(path)}`;
  const tooBig = (size: string) => `${where}: ${size}, more than the limit of ${bytesMax}`;
  try {
    const kind = await stat(path);
    if (kind.isDirectory) return { ok: false, reason: `${where}: is a directory` };
    if (kind.size > bytesMax) return { ok: false, reason: tooBig(`${kind.size} bytes`) };
    const handle = await fs.open(path, "r");
    try {
      const pieces: Uint8Array[] = [];
      let total = 0;
      for (;;) {
        const piece = new Uint8Array(Math.min(READ_PIECE_BYTES, bytesMax + 1 - total));
        const { bytesRead } = await handle.read(piece, 0, piece.length, null);
        if (bytesRead === 0) break;
        pieces.push(piece.subarray(0, bytesRead));
        total += bytesRead;
        if (total > bytesMax) return { ok: false, reason: tooBig("it goes on") };
      }
      const value = new Uint8Array(total);
      let at = 0;
      for (const piece of pieces) {
        value.set(piece, at);
        at += piece.length;
      }
      return { ok: true, value };
    } finally {
      await handle.close();
    }
  } catch (error) {
    return { ok: false, reason: unreadableReason(path, error) };
  }
}

async function nodeStat(path: string): Promise<{ isDirectory: boolean; size: number }> {
  const stat = await fs.stat(path);
  return { isDirectory: stat.isDirectory(), size: stat.size };
}

/** Reads `path` as UTF-8 text, refusing more than `bytesMax` bytes. */
export async function readTextFile(
  path: string,
  options: { bytesMax: number },
  stat?: FileStat,
): Promise<ReadTextResult> {
  const read = await readWholeFile(path, options.bytesMax, stat);
  return read.ok ? { ok: true, text: new TextDecoder().decode(read.value) } : read;
}

/** Reads `path`'s bytes, refusing more than `bytesMax`. */
export async function readBytesFile(
  path: string,
  options: { bytesMax: number },
  stat?: FileStat,
): Promise<ReadBytesResult> {
  const read = await readWholeFile(path, options.bytesMax, stat);
  return read.ok ? { ok: true, bytes: read.value } : read;
}

/** The one-line reason a read of `path` failed with `error` (an errno `code`, as Bun's and Deno's errors carry). */
export function unreadableReason(path: string, error: unknown): string {
  const code = (error as { code?: string }).code ?? "";
  return `cannot read ${JSON.stringify(path)}: ${ERRNO_REASONS[code] ?? ((error as Error).message.split("\n")[0] || code)}`;
}
