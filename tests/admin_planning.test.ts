/**
 * The admin app's split planning runs on the server's worker threads (src/server/split_pool.ts's
 * planRunner), not on the event loop: while a compare of a 100,000-topic table runs, a timer on
 * the event loop stays on time and the app answers /healthz. Asserted two ways, so the test holds
 * on a busy machine: the job is handed to the pool (a spy counts it), and the event loop's worst
 * lateness stays well under the compare's duration (inline, one pause as long as the compare):
 * under half of it, or LATENESS_MS_FLOOR when the compare was quick. On a loaded 2-core machine
 * a timer is late by 100 ms now and then whatever the server does, hence no tighter bound.
 */
import { expect, test } from "bun:test";
import { ADMIN_SPLIT_TOPICS_MAX } from "../src/constants.ts";
import { createAdminApp, type PlanWork, type Planner } from "../src/admin/mod.ts";
import { planRunner } from "../src/server/mod.ts";

/** A valid table of `count` topics in a few hundred partitions, skewed like real volumes. */
function tableOf(count: number): string {
  const lines = ["topic,bytes,messages"];
  for (let index = 0; index < count; index++) {
    const bytes = 1 + Math.floor(1e9 / (1 + (index % 997)) ** 1.2);
    lines.push(
      `team${index % 37}/svc${index % 211}/x${index % 13}/t${index},${bytes},${1 + (bytes >> 7)}`,
    );
  }
  return `${lines.join("\n")}\n`;
}

const LATENESS_MS_FLOOR = 250;

test("a compare of the largest table runs on a worker; the event loop stays responsive", async () => {
  const pool = planRunner(1);
  const handed: PlanWork["kind"][] = [];
  const planner: Planner = {
    concurrency: pool.concurrency,
    run: (work) => {
      handed.push(work.kind);
      return pool.run(work);
    },
  };
  const app = createAdminApp({
    // /healthz reads only whether the store can write (and the topic table's fill).
    stats: () => ({ store: { unwritable: null } }) as never,
    volumes: () => null,
    recoverySeconds: () => {
      throw new Error("not read");
    },
    split: () => ({ storeBytes: 0, last: null }),
    clock: { nowUs: () => 0 },
    planner,
  });
  const csv = tableOf(ADMIN_SPLIT_TOPICS_MAX);
  try {
    // Warm the worker (its start-up is not the planning).
    const small = await app.request("/api/split/compare", { method: "POST", body: tableOf(10) });
    expect(small.status).toBe(200);

    let latenessMsMax = 0;
    let healthy = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      latenessMsMax = Math.max(latenessMsMax, now - last - 10);
      last = now;
      void Promise.resolve(app.request("/healthz")).then((answer) => {
        if (answer.status === 200) healthy++;
      });
    }, 10);
    const started = performance.now();
    const answer = await app.request("/api/split/compare", { method: "POST", body: csv });
    const tookMs = performance.now() - started;
    clearInterval(timer);
    expect(answer.status).toBe(200);
    const body = (await answer.json()) as { table: { topics: string[] }; plans: object };
    expect(body.table.topics.length).toBe(ADMIN_SPLIT_TOPICS_MAX);
    expect(Object.keys(body.plans)).toEqual(["heuristic", "adaptive"]);
    expect(handed).toEqual(["compare", "compare"]);
    expect(healthy).toBeGreaterThan(0);
    console.log(
      `compare of ${ADMIN_SPLIT_TOPICS_MAX} topics: ${tookMs.toFixed(0)} ms, event loop late ${latenessMsMax.toFixed(0)} ms at most`,
    );
    expect(latenessMsMax).toBeLessThan(Math.max(LATENESS_MS_FLOOR, tookMs / 2));
  } finally {
    pool.close();
  }
}, 30_000);
