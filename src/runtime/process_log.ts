/**
 * process_log: the server's Log (src/stdx/log.ts) on this process's standard error, timed by the
 * system clock. Not here: formats and rate limits (stdx/log.ts), what is logged (the callers).
 */
import { createLog, type Log, type LogFormat, type LogLevel } from "../stdx/log.ts";
import { runtime } from "./current_runtime.ts";

/** A Log writing `format` lines at or above `level` to standard error. */
export function processLog(options: { level: LogLevel; format: LogFormat }): Log {
  return createLog({
    ...options,
    sink: (line) => runtime.writeStderr(line),
    nowMs: () => Date.now(),
  });
}
