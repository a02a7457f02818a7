/** stdx: helpers with no domain knowledge. */
export { assert, AssertionError, unreachable } from "./assert.ts";
export { copyBytes } from "./bytes.ts";
export { forEachConcurrently } from "./concurrently.ts";
export { Prng } from "./prng.ts";
export {
  createLog,
  LOG_LEVELS,
  type Log,
  type LogFields,
  type LogFormat,
  type LogLevel,
  silentLog,
} from "./log.ts";
