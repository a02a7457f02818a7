/**
 * files: whole-file reads for commands that take an input file (`split plan --volumes`), over
 * node:fs as Bun implements it (deno_runtime.ts reads through Deno's, sharing `readWholeFile`).
 * Owns turning file-system errors into one-line reasons; a read above the caller's size limit is
 * refused before any byte is read. Never throws for an expected failure (missing, unreadable,
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

/** What a whole-file read needs of a runtime's file system: the file's kind and size, its contents. */
export interface WholeFileAccess<T> {
  stat(path: string): Promise<{ isDirectory: boolean; size: number }>;
  read(path: string): Promise<T>;
}

/**
 * Reads all of `path` through `access`, refusing a directory or a file over `bytesMax` before
 * any byte is read; the one-line reason when it cannot.
 */
export async function readWholeFile<T>(
  path: string,
  bytesMax: number,
  access: WholeFileAccess<T>,
): Promise<{ ok: true; value: T } | { ok: false; reason: string }> {
  const where = `cannot read ${JSON.stringify(path)}`;
  try {
    const stat = await access.stat(path);
    if (stat.isDirectory) return { ok: false, reason: `${where}: is a directory` };
    if (stat.size > bytesMax) {
      return {
        ok: false,
        reason: `${where}: ${stat.size} bytes, more than the limit of ${bytesMax}`,
      };
    }
    return { ok: true, value: await access.read(path) };
  } catch (error) {
    return { ok: false, reason: unreadableReason(path, error) };
  }
}

/** Whole-file reads over node:fs, as Bun implements it. */
const NODE_TEXT: WholeFileAccess<string> = {
  stat: async (path) => {
    const stat = await fs.stat(path);
    return { isDirectory: stat.isDirectory(), size: stat.size };
  },
  read: (path) => fs.readFile(path, "utf8"),
};

/** Reads `path` as UTF-8 text, refusing files larger than `bytesMax`. */
export async function readTextFile(
  path: string,
  options: { bytesMax: number },
): Promise<ReadTextResult> {
  const read = await readWholeFile(path, options.bytesMax, NODE_TEXT);
  return read.ok ? { ok: true, text: read.value } : read;
}

/** Reads `path`'s bytes, refusing files larger than `bytesMax` before reading any. */
export async function readBytesFile(
  path: string,
  options: { bytesMax: number },
): Promise<ReadBytesResult> {
  const read = await readWholeFile(path, options.bytesMax, {
    stat: NODE_TEXT.stat,
    read: async (path) => {
      const bytes = await fs.readFile(path);
      return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    },
  });
  return read.ok ? { ok: true, bytes: read.value } : read;
}

/** The one-line reason a read of `path` failed with `error` (an errno `code`, as Bun's and Deno's errors carry). */
export function unreadableReason(path: string, error: unknown): string {
  const code = (error as { code?: string }).code ?? "";
  return `cannot read ${JSON.stringify(path)}: ${ERRNO_REASONS[code] ?? ((error as Error).message.split("\n")[0] || code)}`;
}
