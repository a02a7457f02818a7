/**
 * Log: structured log lines (an event, its level and fields) as text or JSON, one per line, to a
 * sink the runtime gives (standard error). The core logs through this interface only; the clock
 * and the sink come in from `src/runtime/`, so the core stays pure.
 *
 *   text: 2026-12-03T13:50:00.123Z INFO connection closed user=alice address=127.0.0.1:40312 reason="peer closed"
 *   json: {"time":"2026-12-03T13:50:00.123Z","level":"info","msg":"connection closed","user":"alice",…}
 *
 * A flood of one event (ten thousand connections in a second) must not become a flood of writes
 * on the event loop: each message writes at most `linesPerSecondMax` lines a second; the rest are
 * counted and one line says how many were dropped. Not here: what to log (the callers), where
 * lines go (the sink). Invariants: one line per call or none, never split; a line below the level
 * costs one comparison.
 */

/** Levels, least severe first. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;

/** How severe a line is. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** How lines are written. */
export type LogFormat = "text" | "json";

/** The fields of a line; undefined ones are left out. */
export type LogFields = Record<string, string | number | boolean | null | undefined>;

/** Writes structured log lines. */
export interface Log {
  /** True when a line at `level` would be written. */
  enabled(level: LogLevel): boolean;
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

/** Where a Log's lines go and what it asks of the world. */
export interface LogOptions {
  level: LogLevel;
  format: LogFormat;
  /** Writes one whole line (with its newline). */
  sink: (line: string) => void;
  /** Milliseconds since the epoch. */
  nowMs: () => number;
  /** Lines of one message per second before the rest are dropped and counted. */
  linesPerSecondMax?: number;
}

/** Lines of one message per second by default; the rest are counted in a later line. */
export const LOG_LINES_PER_SECOND_MAX = 50;

/** Messages whose rate is tracked; past it the table is cleared (a leak cannot grow). */
const RATE_MESSAGES_MAX = 1024;

interface MessageRate {
  secondStartMs: number;
  lines: number;
  dropped: number;
}

/** A Log that writes nothing. */
export const silentLog: Log = {
  enabled: () => false,
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
};

/** Creates a Log writing at or above `options.level`. */
export function createLog(options: LogOptions): Log {
  const threshold = LOG_LEVELS.indexOf(options.level);
  const perSecond = options.linesPerSecondMax ?? LOG_LINES_PER_SECOND_MAX;
  const rates = new Map<string, MessageRate>();
  const write = (level: LogLevel, message: string, fields: LogFields | undefined) => {
    if (LOG_LEVELS.indexOf(level) < threshold) return;
    const now = options.nowMs();
    let rate = rates.get(message);
    if (rate === undefined) {
      if (rates.size >= RATE_MESSAGES_MAX) rates.clear();
      rate = { secondStartMs: now, lines: 0, dropped: 0 };
      rates.set(message, rate);
    }
    if (now - rate.secondStartMs >= 1000) {
      const dropped = rate.dropped;
      rate.secondStartMs = now;
      rate.lines = 0;
      rate.dropped = 0;
      if (dropped > 0)
        options.sink(
          formatLine(options.format, now, "warn", "log lines dropped", { message, dropped }),
        );
    }
    if (rate.lines >= perSecond) {
      rate.dropped++;
      return;
    }
    rate.lines++;
    options.sink(formatLine(options.format, now, level, message, fields));
  };
  return {
    enabled: (level) => LOG_LEVELS.indexOf(level) >= threshold,
    debug: (message, fields) => write("debug", message, fields),
    info: (message, fields) => write("info", message, fields),
    warn: (message, fields) => write("warn", message, fields),
    error: (message, fields) => write("error", message, fields),
  };
}

/** One line of `format`, newline included. */
export function formatLine(
  format: LogFormat,
  nowMs: number,
  level: LogLevel,
  message: string,
  fields: LogFields | undefined,
): string {
  const time = new Date(nowMs).toISOString();
  if (format === "json") {
    const record: Record<string, unknown> = { time, level, msg: message };
    if (fields !== undefined)
      for (const [key, value] of Object.entries(fields))
        if (value !== undefined && !(key in record)) record[key] = value;
    return `${JSON.stringify(record)}\n`;
  }
  let line = `${time} ${level.toUpperCase()} ${oneLine(message)}`;
  if (fields !== undefined)
    for (const [key, value] of Object.entries(fields))
      if (value !== undefined) line += ` ${key}=${textValue(value)}`;
  return `${line}\n`;
}

/** A field's value in the text format: bare when it is one plain word, else a JSON string. */
function textValue(value: string | number | boolean | null): string {
  if (typeof value !== "string") return String(value);
  return /^[\w./:@[\]*+-]+$/.test(value) ? value : JSON.stringify(value);
}

/** A message on one line (a newline in it would forge a line). */
function oneLine(text: string): string {
  return /[\n\r]/.test(text) ? JSON.stringify(text) : text;
}
