// Split visualiser: the heuristic and adaptive plans of one volume table side by side — the live
// volumes (GET api/split/compare) or an uploaded CSV (POST) — each with its store count, the four
// waste figures, an icicle of the topic tree coloured by store, the worst-waste and worst-ratio
// topics outlined, and a tooltip with bytes and waste under the mouse.
import { api } from "./api.js";
import { el, formatBytes, formatCount, formatPercent, formatRatio } from "./format.js";
import {
  buildTree,
  drawIcicle,
  drawnRoot,
  layoutFrom,
  MIXED_FILL,
  storeColor,
  storesOfNodes,
  weightsOf,
} from "./icicle.js";

const PLANS = [
  ["heuristic", "Heuristic", "one store per first three segments"],
  ["adaptive", "Adaptive", "cut by measured volume"],
];
const STORES_LISTED = 12;

/** Sets up the view; show() plans the live volumes the first time it opens. */
export function startSplit(root) {
  const error = root.querySelector("#split-error");
  const summary = root.querySelector("#split-summary");
  const plansBox = root.querySelector("#split-plans");
  const help = root.querySelector("#split-help");
  const maxInput = root.querySelector("#split-max");
  const tooltip = document.getElementById("tooltip");
  // `ticket` numbers plan requests: only the newest one's answer is shown (an upload made while
  // the live plan is loading must not be overwritten by it).
  // `focus` is the node the pictures are zoomed to (0: everything).
  const state = {
    source: "live",
    csv: null,
    fileName: null,
    scale: "log",
    view: null,
    shown: false,
    ticket: 0,
    focus: 0,
  };
  const crumbs = root.querySelector("#split-crumbs");

  async function plan() {
    error.hidden = true;
    const maxStores = maxInput.value.trim();
    const query = maxStores === "" ? "" : `?maxStores=${encodeURIComponent(maxStores)}`;
    summary.textContent = "Planning…";
    const ticket = ++state.ticket;
    try {
      const answer =
        state.source === "upload"
          ? await api(`api/split/compare${query}`, {
              method: "POST",
              body: state.csv,
              headers: { "Content-Type": "text/csv" },
            })
          : await api(`api/split/compare${query}`);
      if (ticket !== state.ticket) return;
      state.view = prepare(answer);
      state.focus = 0;
      render();
    } catch (failure) {
      if (ticket !== state.ticket) return;
      state.view = null;
      plansBox.hidden = true;
      help.hidden = true;
      crumbs.hidden = true;
      if (failure.status === 409) {
        // Nothing published yet: not an error, just nothing to draw.
        summary.textContent = `Nothing to plan: ${failure.message}.`;
        return;
      }
      summary.textContent = "";
      error.textContent = `Cannot plan ${state.source === "upload" ? state.fileName : "the live volumes"}: ${failure.message}`;
      error.hidden = false;
    }
  }

  function render() {
    const view = state.view;
    const { table } = view;
    const source =
      state.source === "upload" ? state.fileName : "Live volumes (published since start)";
    summary.replaceChildren(
      el("b", { text: source }),
      `: ${formatCount(table.topics.length)} topics in ${formatCount(view.partitions)} partitions, ${formatBytes(table.bytesTotal)}.`,
    );
    plansBox.hidden = false;
    help.hidden = false;
    const top = drawnRoot(view.tree, state.focus);
    renderCrumbs(view.tree, top);
    const shown = view.tree.hi[top] - view.tree.lo[top];
    const heightPx = Math.max(380, Math.min(640, shown * 13));
    const layout = layoutFrom(view.tree, weightsOf(view.tree, table, state.scale), top, heightPx);
    const panels = [];
    for (const [key, title, what] of PLANS) {
      const panel = plansBox.querySelector(`[data-plan="${key}"]`);
      panels.push(
        renderPlan(panel, view, layout, key, title, what, heightPx, (node, event) => {
          for (const other of panels) other.setHover(node);
          showTooltip(tooltip, view, node, event);
        }),
      );
    }
  }

  function zoom(node) {
    state.focus = node;
    tooltip.hidden = true;
    render();
  }

  /** "all topics / desk / fx": where the pictures are zoomed, each step a way back up. */
  function renderCrumbs(tree, top) {
    const path = [];
    for (let node = top; node > 0; node = tree.parent[node]) path.unshift(node);
    crumbs.replaceChildren(el("span", { class: "note", text: "Showing " }));
    const step = (node, text) => {
      if (node === top || (node === 0 && state.focus === 0)) return el("b", { text });
      const button = el("button", { type: "button", class: "link", text });
      button.addEventListener("click", () => zoom(node));
      return button;
    };
    crumbs.append(step(0, "all topics"));
    for (const node of path)
      crumbs.append(el("span", { class: "sep", text: "/" }), step(node, tree.name[node]));
    crumbs.append(
      el("span", {
        class: "note",
        text: tree.children[top].some((child) => tree.children[child].length > 0)
          ? " · click a prefix to zoom in"
          : "",
      }),
    );
    crumbs.hidden = false;
  }

  root.querySelector("#split-live").addEventListener("click", () => {
    state.source = "live";
    void plan();
  });
  root.querySelector("#split-file").addEventListener("change", async (event) => {
    const file = event.target.files?.[0];
    if (file === undefined) return;
    state.source = "upload";
    state.fileName = file.name;
    state.csv = await file.text();
    event.target.value = "";
    void plan();
  });
  maxInput.addEventListener("change", () => {
    if (state.view !== null) void plan();
  });
  for (const button of root.querySelectorAll("[data-scale]")) {
    button.addEventListener("click", () => {
      state.scale = button.dataset.scale;
      for (const other of root.querySelectorAll("[data-scale]"))
        other.classList.toggle("on", other === button);
      if (state.view !== null) render();
    });
  }
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      if (state.view !== null && !root.hidden) render();
    }, 150);
  });
  return {
    show() {
      if (state.shown) {
        if (state.view !== null) render();
        return;
      }
      state.shown = true;
      void plan();
    },
  };

  function renderPlan(panel, view, layout, key, title, what, heightPx, onHover) {
    const plan = view.plans[key];
    const metrics = plan.json.metrics;
    const baseline = view.plans.heuristic.json.metrics.wastedBytesTotal;
    let delta = el("span", { class: "delta", text: "baseline" });
    if (key !== "heuristic") {
      const change =
        baseline > 0
          ? metrics.wastedBytesTotal / baseline - 1
          : metrics.wastedBytesTotal > 0
            ? Infinity
            : 0;
      const text =
        change === 0
          ? "same waste"
          : change === Infinity
            ? "more waste"
            : `${change < 0 ? "−" : "+"}${formatPercent(Math.abs(change))} waste`;
      delta = el("span", { class: `delta ${change <= 0 ? "better" : "worse"}`, text });
    }
    const budget = plan.json.budgetRaisedTo ?? plan.json.budget;
    const header = el(
      "header",
      {},
      el("h3", { text: title }),
      el("span", {
        class: "what",
        text: budget === undefined ? what : `${what}, budget ${budget}`,
      }),
      delta,
    );
    const figures = el(
      "table",
      { class: "figures" },
      metric(
        "stores",
        "stores",
        formatCount(metrics.stores),
        `${formatCount(view.partitions)} partitions`,
      ),
      metric(
        "wasted",
        "wasted, topic reads",
        formatBytes(metrics.wastedBytesTotal),
        `summed over ${formatCount(view.table.topics.length)} topics`,
      ),
      metric(
        "worst-waste",
        "worst waste",
        formatBytes(metrics.worstWaste.wastedBytes),
        metrics.worstWaste.topic,
        "waste",
      ),
      metric(
        "worst-ratio",
        "worst ratio",
        formatRatio(metrics.worstRatio.ratio),
        metrics.worstRatio.topic,
        "ratio",
      ),
      metric(
        "subtree-wasted",
        "wasted, subtree reads",
        formatBytes(metrics.subtrees.wastedBytesTotal),
        `over ${formatCount(metrics.subtrees.count)} subtrees`,
      ),
    );
    const picture = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    picture.setAttribute("class", "icicle");
    picture.setAttribute("role", "img");
    picture.setAttribute("aria-label", `${title} plan: topic tree coloured by store`);
    panel.replaceChildren(header, figures, picture, storeList(view, plan));
    const widthPx = Math.max(300, Math.floor(picture.getBoundingClientRect().width));
    const topicIndex = view.topicIndex;
    return drawIcicle(picture, view.tree, layout, {
      widthPx,
      heightPx,
      colorOfNode: (node) =>
        plan.nodeStore[node] < 0 ? MIXED_FILL : plan.colorOfStore[plan.nodeStore[node]],
      labelOfNode: (node) =>
        view.tree.self[node] === 1 ? `${view.tree.name[node]} (itself)` : view.tree.name[node],
      // Nothing to point at when no byte is wasted.
      marks: [
        metrics.worstRatio.ratio > 1
          ? { topic: topicIndex.get(metrics.worstRatio.topic), kind: "ratio" }
          : null,
        metrics.worstWaste.wastedBytes > 0
          ? { topic: topicIndex.get(metrics.worstWaste.topic), kind: "waste" }
          : null,
      ].filter((mark) => mark !== null),
      onHover: (node, event) => onHover(node < 0 ? -1 : node, { event, plan: key }),
      onZoom: zoom,
    });
  }
}

function metric(name, label, value, detail, mark) {
  return el(
    "tr",
    { "data-metric": name },
    el("th", {}, mark === undefined ? null : el("span", { class: `mark ${mark}` }), label),
    el("td", { class: "value", text: value }),
    el("td", { class: "topic", text: detail, title: detail }),
  );
}

function storeList(_view, plan) {
  const list = el("ul", { class: "stores" });
  const order = plan.json.stores
    .map((_store, index) => index)
    .sort((a, b) => plan.json.stores[b].bytes - plan.json.stores[a].bytes);
  for (const index of order.slice(0, STORES_LISTED)) {
    const store = plan.json.stores[index];
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = plan.colorOfStore[index];
    list.append(
      el(
        "li",
        { title: `${store.id}: ${store.topics.length} topics` },
        swatch,
        el("span", { class: "id", text: store.id }),
        el("span", {
          class: "size",
          text: `${formatBytes(store.bytes)} · ${formatCount(store.topics.length)}`,
        }),
      ),
    );
  }
  if (order.length > STORES_LISTED)
    list.append(
      el("li", {
        class: "note",
        text: `+ ${formatCount(order.length - STORES_LISTED)} smaller stores`,
      }),
    );
  return list;
}

/** The table, its tree, and per plan: store of each topic and node, store colours. */
function prepare(answer) {
  const table = answer.table;
  const tree = buildTree(table);
  const topicIndex = new Map(table.topics.map((topic, index) => [topic, index]));
  const ids = [
    ...new Set(PLANS.flatMap(([key]) => answer.plans[key].stores.map((store) => store.id))),
  ].sort();
  const colorOfId = new Map(ids.map((id, index) => [id, storeColor(index)]));
  const plans = {};
  for (const [key] of PLANS) {
    const json = answer.plans[key];
    const storeOfTopic = new Int32Array(table.topics.length).fill(-1);
    json.stores.forEach((store, index) => {
      for (const topic of store.topics) storeOfTopic[topicIndex.get(topic)] = index;
    });
    plans[key] = {
      json,
      storeOfTopic,
      nodeStore: storesOfNodes(tree, storeOfTopic),
      colorOfStore: json.stores.map((store) => colorOfId.get(store.id)),
    };
  }
  const partitions = new Set(table.topics.map((topic) => topic.split("/").slice(0, 2).join("/")))
    .size;
  return { table, tree, topicIndex, plans, partitions };
}

/** Fills and places the tooltip for `node` of the plan under the mouse, or hides it. */
function showTooltip(tooltip, view, node, { event, plan: key }) {
  if (node < 0) {
    tooltip.hidden = true;
    return;
  }
  const { tree, table } = view;
  const plan = view.plans[key];
  const stores = plan.json.stores;
  const rows = [];
  let kind;
  if (tree.children[node].length === 0) {
    const topic = tree.topic[node];
    const store = stores[plan.storeOfTopic[topic]];
    const bytes = table.bytes[topic];
    kind = tree.self[node] === 1 ? "topic (itself, without the topics below it)" : "topic";
    rows.push(
      ["bytes", formatBytes(bytes)],
      ["messages", formatCount(table.messages[topic])],
      ["store", store.id],
      ["store bytes", formatBytes(store.bytes)],
    );
    rows.push(
      ["waste", formatBytes(store.bytes - bytes)],
      ["read ÷ wanted", formatRatio(store.bytes / Math.max(1, bytes))],
    );
  } else {
    // A subtree reader reads every store holding one of its topics.
    const touched = new Set();
    let bytes = 0;
    let messages = 0;
    for (let topic = tree.lo[node]; topic < tree.hi[node]; topic++) {
      touched.add(plan.storeOfTopic[topic]);
      bytes += table.bytes[topic];
      messages += table.messages[topic];
    }
    let read = 0;
    for (const index of touched) read += stores[index].bytes;
    kind = `subtree ${tree.path[node]}/**`;
    rows.push(
      ["bytes", formatBytes(bytes)],
      ["messages", formatCount(messages)],
      ["topics", formatCount(tree.hi[node] - tree.lo[node])],
      ["stores read", formatCount(touched.size)],
    );
    rows.push(
      ["waste", formatBytes(read - bytes)],
      ["read ÷ wanted", formatRatio(read / Math.max(1, bytes))],
    );
  }
  const list = el("dl");
  for (const [name, value] of rows)
    list.append(el("dt", { text: name }), el("dd", { text: value }));
  tooltip.replaceChildren(
    el("div", { class: "path", text: tree.path[node] }),
    el("div", { class: "note", text: `${kind} · ${key} plan` }),
    list,
  );
  tooltip.hidden = false;
  const x = Math.min(event.clientX + 14, window.innerWidth - tooltip.offsetWidth - 8);
  const y = Math.min(event.clientY + 14, window.innerHeight - tooltip.offsetHeight - 8);
  tooltip.style.left = `${x}px`;
  tooltip.style.top = `${y}px`;
}
