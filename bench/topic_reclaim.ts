/**
 * Topic id reclaim at scale (issue 28 part 4): a table filled to TOPICS_MAX (4,194,304 topics,
 * or `--topics`), whose oldest `--free` fraction then holds no record. New topics are interned
 * until every freed id is reused; each reclaim step is timed (the longest is the pause a publish
 * can meet), and so are `--matchers` matchers catching up with the epochs (each clears the ids
 * reclaimed since it last looked, or everything when too far behind).
 *
 *   bun bench/topic_reclaim.ts [--topics 4194304] [--free 0.5] [--matchers 100]
 */
import { parseArgs } from "node:util";
import { TOPICS_MAX } from "../src/constants.ts";
import { Filter } from "../src/topic/filter.ts";
import { FilterMatcher } from "../src/topic/filter_matcher.ts";
import { TopicTable } from "../src/topic/topic_table.ts";

const { values } = parseArgs({
  options: {
    topics: { type: "string" },
    free: { type: "string" },
    matchers: { type: "string" },
  },
});
const topics = Number(values.topics ?? TOPICS_MAX);
const freeShare = Number(values.free ?? 0.5);
const matcherCount = Number(values.matchers ?? 100);

const table = new TopicTable({ topicsMax: topics });
let horizon = 0;
table.reclaimBelow(() => horizon);
const matchers = Array.from(
  { length: matcherCount },
  (_, m) => new FilterMatcher(table, Filter.of(`t/${m}/**`)),
);
let started = performance.now();
for (let i = 0; i < topics; i++) table.intern(`t/${i % 1000}/${i}`, i + 1);
console.log(`${topics} topics interned in ${(performance.now() - started).toFixed(0)} ms`);
// Every matcher has an answer for every id (the worst case for catching up).
started = performance.now();
for (const matcher of matchers) for (let id = 0; id < topics; id++) matcher.matches(id);
console.log(
  `${matcherCount} matchers answered every id in ${(performance.now() - started).toFixed(0)} ms`,
);

horizon = Math.floor(topics * freeShare) + 1;
const steps: number[] = [];
const catchUps: number[] = [];
const original = table.reclaim.bind(table);
table.reclaim = () => {
  const before = performance.now();
  const released = original();
  steps.push(performance.now() - before);
  return released;
};
let interned = 0;
started = performance.now();
for (let i = 0; interned < horizon - 1; i++) {
  const epoch = table.reclaimEpoch;
  if (!table.intern(`n/${i % 1000}/${i}`, topics + i + 1).ok) break;
  interned++;
  if (table.reclaimEpoch !== epoch) {
    // Each matcher looks once per epoch, the costliest order for them.
    const before = performance.now();
    for (const matcher of matchers) matcher.matches(0);
    catchUps.push(performance.now() - before);
  }
}
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const at = (xs: number[], q: number) =>
  sorted(xs)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
console.log(
  `${interned} new topics took freed ids in ${(performance.now() - started).toFixed(0)} ms; ` +
    `${table.topicsReclaimed} reclaimed in ${steps.length} steps`,
);
const over = (xs: number[]) => xs.filter((ms) => ms > 50).length;
console.log(
  `reclaim step ms: median ${at(steps, 0.5).toFixed(2)}, p99 ${at(steps, 0.99).toFixed(2)}, ` +
    `max ${at(steps, 1).toFixed(2)}, over 50 ms: ${over(steps)} of ${steps.length}`,
);
console.log(
  `${matcherCount} matchers catching up with an epoch, ms: median ${at(catchUps, 0.5).toFixed(2)}, ` +
    `p99 ${at(catchUps, 0.99).toFixed(2)}, max ${at(catchUps, 1).toFixed(2)}, ` +
    `over 50 ms: ${over(catchUps)} of ${catchUps.length}`,
);
