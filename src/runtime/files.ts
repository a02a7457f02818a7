/**
 * files: whole-file reads for commands that take an input file (`split plan --volumes`), over
 * node:fs as Bun implements it (deno_runtime.ts has Deno's, sharing `unreadable`).
 * Owns turning file-system errors into one-line reasons; a read above the caller's size limit is
 * refused before any byte is read. Never throws for an expected failure (missing, unreadable,
 * a directory, too big): returns the reason.
 */
import { promises as fs } from "node:fs";

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

/** Reads `path` as UTF-8 text, refusing files larger than `bytesMax`. */
export async function readTextFile(
  path: string,
  options: { bytesMax: number },
): Promise<ReadTextResult> {
  const where = `cannot read ${JSON.stringify(path)}`;
  try {
    const stat = await fs.stat(path);
    if (stat.isDirectory()) return { ok: false, reason: `${where}: is a directory` };
    if (stat.size > options.bytesMax) {
      return {
        ok: false,
        reason: `${where}: ${stat.size} bytes, more than the limit of ${options.bytesMax}`,
      };
    }
    return { ok: true, text: await fs.readFile(path, "utf8") };
  } catch (error) {
    return unreadable(path, error);
  }
}

/** The one-line reason a read of `path` failed with `error` (an errno `code`, as Bun's and Deno's errors carry). */
export function unreadable(path: string, error: unknown): ReadTextResult {
  const code = (error as { code?: string }).code ?? "";
  return {
    ok: false,
    reason: `cannot read ${JSON.stringify(path)}: ${ERRNO_REASONS[code] ?? ((error as Error).message.split("\n")[0] || code)}`,
  };
}
