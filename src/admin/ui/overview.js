// Overview: polls /api/stats every second and shows publish rate (with a one-minute sparkline),
// totals, subscriptions by state, tip fill and oldest seq, block pool use, disk and recoveries,
// and the replicas following this server (their durable seq and lag), when there are any.
import { api } from "./api.js";
import {
  el,
  formatBytes,
  formatCount,
  formatPercent,
  formatRate,
  setField,
  svg,
} from "./format.js";

const POLL_MS = 1000;
const HISTORY_POINTS = 60;
const STATES = [
  ["live", "live"],
  ["tip", "tip recovery"],
  ["disk", "disk recovery"],
  ["stalled", "stalled"],
];

/** Starts polling; `onConnection(ok, text)` reports whether the server answers. */
export function startOverview(root, onConnection) {
  const history = [];
  let timer = null;

  async function refresh() {
    clearTimeout(timer);
    try {
      const stats = await api("api/stats");
      render(root, stats, history);
      onConnection(true, `live · ${new Date(stats.timeUs / 1000).toLocaleTimeString()}`);
    } catch (error) {
      onConnection(false, error.status === 401 ? "token needed" : "no answer");
    }
    timer = setTimeout(refresh, POLL_MS);
  }
  void refresh();
  return { refresh };
}

function render(root, stats, history) {
  const { broker, tip, store, rates, split } = stats;
  setField(root, "rate-messages", formatRate(rates.messagesPerSecond));
  setField(
    root,
    "rate-bytes",
    formatBytes(rates.bytesPerSecond === null ? null : Math.round(rates.bytesPerSecond)),
  );
  setField(
    root,
    "rate-window",
    rates.windowSeconds > 0 ? `${rates.windowSeconds.toFixed(1)} s` : "—",
  );
  history.push(rates.messagesPerSecond ?? 0);
  if (history.length > HISTORY_POINTS) history.shift();
  drawSparkline(root.querySelector("#spark"), history);

  setField(root, "published-messages", formatCount(broker.messagesPublished));
  setField(root, "published-bytes", formatBytes(broker.bytesPublished));
  setField(root, "next-seq", formatCount(broker.nextSeq));
  setField(root, "delivered-messages", formatCount(broker.messagesDelivered));
  setField(root, "connections", formatCount(broker.connections));

  setField(root, "subscriptions", formatCount(broker.subscriptions));
  renderSubscriptions(root, broker.subscriptionsByPhase, broker.subscriptions);

  const tipFill = tip.capacityBytes > 0 ? tip.bytesUsed / tip.capacityBytes : 0;
  setField(root, "tip-fill", formatPercent(tipFill));
  root.querySelector("#tip-meter").style.width = `${Math.min(100, tipFill * 100)}%`;
  setField(root, "tip-used", formatBytes(tip.bytesUsed));
  setField(root, "tip-capacity", formatBytes(tip.capacityBytes));
  setField(root, "tip-records", formatCount(tip.records));
  setField(root, "tip-oldest", tip.records > 0 ? formatCount(tip.firstSeq) : "— (empty)");

  const poolFill = tip.poolBlocksMax > 0 ? tip.poolBlocksUsed / tip.poolBlocksMax : 0;
  setField(root, "pool-fill", formatPercent(poolFill));
  root.querySelector("#pool-meter").style.width =
    `${Math.max(poolFill > 0 ? 1 : 0, Math.min(100, poolFill * 100))}%`;
  setField(root, "pool-used", formatCount(tip.poolBlocksUsed));
  setField(root, "pool-free", formatCount(tip.poolBlocksFree));
  setField(root, "pool-evictions", formatCount(tip.evictionsForPool));

  setField(
    root,
    "disk-total",
    formatBytes(store.segmentBytes + store.journalBytes + split.storeBytes + store.manifestBytes),
  );
  setField(root, "disk-segments", formatBytes(store.segmentBytes));
  setField(root, "segments", `${formatCount(store.segments)} files`);
  setField(root, "disk-journal", formatBytes(store.journalBytes));
  setField(
    root,
    "disk-stores",
    `${formatBytes(split.storeBytes)} (${formatCount(store.stores ?? 0)})`,
  );

  setField(root, "recoveries", formatCount(broker.recoveries.tip + broker.recoveries.disk));
  setField(root, "recoveries-tip", formatCount(broker.recoveries.tip));
  setField(root, "recoveries-disk", formatCount(broker.recoveries.disk));
  const last = split.last;
  setField(
    root,
    "last-split",
    last === null
      ? "none yet"
      : last.finishedUs === null
        ? `${formatCount(last.storesWritten)} stores (time not recorded)`
        : new Date(last.finishedUs / 1000).toLocaleString(),
  );
  renderReplicas(root, stats.replicas ?? []);
}

/** The replicas following this server (docs/cluster.md): one row each; hidden when none. */
function renderReplicas(root, replicas) {
  const card = root.querySelector("#replicas-card");
  card.hidden = replicas.length === 0;
  const rows = replicas.map((replica) =>
    el(
      "tr",
      { "data-replica": replica.id },
      el("td", { text: replica.id }),
      el("td", {
        text: !replica.connected ? "disconnected" : replica.inSync ? "in sync" : "behind",
      }),
      el("td", { text: formatCount(replica.durableSeq) }),
      el("td", { text: formatCount(replica.lagMessages) }),
      el("td", { text: replica.lagMs === null ? "—" : formatCount(Math.round(replica.lagMs)) }),
    ),
  );
  root.querySelector("#replicas tbody").replaceChildren(...rows);
}

function renderSubscriptions(root, byPhase, total) {
  const bar = root.querySelector("#subs-bar");
  const legend = root.querySelector("#subs-legend");
  bar.replaceChildren();
  legend.replaceChildren();
  for (const [phase, label] of STATES) {
    const count = byPhase[phase] ?? 0;
    const part = el("span", { class: `state-${phase}`, title: `${label}: ${count}` });
    part.style.width = `${total > 0 ? (count / total) * 100 : 0}%`;
    bar.append(part);
    legend.append(
      el(
        "li",
        { "data-state": phase },
        el("span", { class: `swatch state-${phase}` }),
        label,
        el("b", { text: formatCount(count) }),
      ),
    );
  }
}

function drawSparkline(node, history) {
  const width = 300;
  const height = 60;
  const max = Math.max(1, ...history);
  const step = width / (HISTORY_POINTS - 1);
  const offset = (HISTORY_POINTS - history.length) * step;
  const points = history.map(
    (value, index) =>
      `${(offset + index * step).toFixed(1)},${(height - 2 - (value / max) * (height - 6)).toFixed(1)}`,
  );
  node.replaceChildren();
  if (points.length < 2) return;
  node.append(
    svg("path", {
      class: "area",
      d: `M${points[0].split(",")[0]},${height} L${points.join(" L")} L${width},${height} Z`,
    }),
  );
  node.append(svg("path", { class: "line", d: `M${points.join(" L")}` }));
}
