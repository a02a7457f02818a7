/**
 * build_info: which commit this program was built from, for `aria --version` and `/metrics`.
 * The compiled binary carries it as a constant that scripts/build.ts defines (`--define
 * ARIA_BUILD_COMMIT=...`); run from source (`bun main.ts`, `deno task aria`), it is read from the
 * checkout's `.git` (HEAD, then the branch's ref, loose or packed), with node:fs, which Bun and Deno
 * both implement. Never throws: what cannot be found is "unknown".
 */
import { readFileSync } from "node:fs";

declare const ARIA_BUILD_COMMIT: string | undefined;

/** The repository root, when this file runs from a checkout (src/runtime/ is two levels down). */
const SOURCE_ROOT = new URL("../../", import.meta.url);

function readText(url: URL): string | null {
  try {
    return readFileSync(url, "utf8");
  } catch {
    return null;
  }
}

/** The commit a `.git` directory's HEAD names, or null (no checkout, an unreadable ref). */
export function gitHeadCommit(gitDir: URL): string | null {
  const head = readText(new URL("HEAD", gitDir))?.trim();
  if (head === undefined) return null;
  if (/^[0-9a-f]{40}$/.test(head)) return head;
  const ref = /^ref: (\S+)$/.exec(head)?.[1];
  if (ref === undefined) return null;
  const loose = readText(new URL(ref, gitDir))?.trim();
  if (loose !== undefined && /^[0-9a-f]{40}$/.test(loose)) return loose;
  for (const line of (readText(new URL("packed-refs", gitDir)) ?? "").split("\n")) {
    const [commit, name] = line.split(" ");
    if (name === ref && commit !== undefined && /^[0-9a-f]{40}$/.test(commit)) return commit;
  }
  return null;
}

/** The commit this program was built from: 12 hex digits (with "-dirty" for a build of uncommitted changes), or "unknown". */
export function buildCommit(): string {
  if (typeof ARIA_BUILD_COMMIT === "string" && ARIA_BUILD_COMMIT !== "") return ARIA_BUILD_COMMIT;
  if (SOURCE_ROOT.protocol !== "file:") return "unknown";
  return gitHeadCommit(new URL(".git/", SOURCE_ROOT))?.slice(0, 12) ?? "unknown";
}
