/**
 * The `aria-from` user property of an MQTT SUBSCRIBE: where the subscription starts, as a native
 * start position. `earliest`, a seq (`12345`), an ISO 8601 time (`2026-12-03T10:00:00Z`) or a
 * duration back from now (`10m`, `1.5h`, `500ms`, `7d`). Pure: the time comes in as an argument.
 */
import type { StartPosition } from "../protocol/mod.ts";

const DURATION_US: Record<string, number> = {
  ms: 1_000,
  s: 1_000_000,
  m: 60_000_000,
  h: 3_600_000_000,
  d: 86_400_000_000,
  w: 604_800_000_000,
};

/** The start an `aria-from` value names, or why it names none. */
export function parseAriaFrom(
  text: string,
  nowUs: number,
): { ok: true; start: StartPosition } | { ok: false; reason: string } {
  const value = text.trim();
  if (value === "earliest") return { ok: true, start: { kind: "earliest" } };
  if (value === "live") return { ok: true, start: { kind: "live" } };
  if (/^\d{1,16}$/.test(value)) {
    const seq = Number(value);
    if (seq >= 1 && Number.isSafeInteger(seq)) return { ok: true, start: { kind: "seq", seq } };
  }
  const duration = /^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$/.exec(value);
  if (duration !== null) {
    const timeUs = Math.max(0, Math.round(nowUs - Number(duration[1]) * DURATION_US[duration[2]]));
    return { ok: true, start: { kind: "time", timeUs } };
  }
  if (/^\d{4}-\d{2}-\d{2}(T|$)/.test(value)) {
    const ms = Date.parse(value);
    if (Number.isFinite(ms) && ms >= 0)
      return { ok: true, start: { kind: "time", timeUs: ms * 1000 } };
  }
  return {
    ok: false,
    reason: `aria-from "${value.slice(0, 64)}" is not earliest, live, a seq, an ISO time or a duration (10m)`,
  };
}
