/**
 * assert: the one way to state an invariant. Always on, never caught to carry on.
 * A failed assertion is a bug in Aria, not bad input: bad input gets a result or a typed error.
 */

/** An invariant of Aria's code does not hold. */
export class AssertionError extends Error {
  override name = "AssertionError";
}

/** Throws AssertionError with a constant message when `condition` is false. */
export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionError(message);
}

/** Marks a branch the type system proves unreachable. */
export function unreachable(value: never): never {
  throw new AssertionError(`unreachable: ${String(value)}`);
}
