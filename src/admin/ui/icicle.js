// Icicle of a topic tree, drawn in SVG: one column per depth (first segment at the left), each
// node a cell as tall as its weight (bytes, or log bytes so small topics stay visible), cells
// coloured by the store their topics go to. A topic that also has topics below it gets an
// "itself" cell beside its children, so every byte has one cell.
//
// Tree arrays (parallel, by node index; node 0 is the invisible root):
//   name, path, depth, parent, children (indexes), topic (table index of the topic a leaf or
//   "itself" cell stands for, else -1), self (1 for an "itself" cell), lo/hi (the node's topics
//   are table indexes lo..hi-1: the table is sorted segment by segment, so a subtree is one run).
import { svg } from "./format.js";

const PALETTE = [
  "#4e79a7",
  "#59a14f",
  "#edc948",
  "#b07aa1",
  "#76b7b2",
  "#f28e2b",
  "#9c755f",
  "#a0cbe8",
  "#8cd17d",
  "#d37295",
  "#499894",
  "#fabfd2",
  "#b6992d",
  "#79706e",
  "#d4a6c8",
];
/** Fill of a prefix whose topics go to several stores. */
export const MIXED_FILL = "#d5d9e0";
const PIN_WIDTH = 12;
/** Cells thinner than this are merged into strips (see drawIcicle). */
const CELL_MIN_PX = 2;
const LABEL_MIN_PX = 11;

/** Colour of the i-th store id (ids of both plans share one numbering, so a store keeps its colour). */
export function storeColor(index) {
  if (index < PALETTE.length) return PALETTE[index];
  const hue = (index * 137.508) % 360;
  return `hsl(${hue.toFixed(0)} 45% ${index % 2 === 0 ? 62 : 72}%)`;
}

/** Builds the tree of a table ({topics, bytes}) whose topics are sorted segment by segment. */
export function buildTree(table) {
  const tree = {
    name: [""],
    path: [""],
    depth: [0],
    parent: [-1],
    children: [[]],
    topic: [-1],
    self: [0],
    lo: [0],
    hi: [table.topics.length],
  };
  const childByName = [new Map()];
  const add = (parent, name, path, topic, self) => {
    const index = tree.name.length;
    tree.name.push(name);
    tree.path.push(path);
    tree.depth.push(tree.depth[parent] + 1);
    tree.parent.push(parent);
    tree.children.push([]);
    tree.topic.push(topic);
    tree.self.push(self);
    tree.lo.push(Math.max(topic, 0));
    tree.hi.push(0);
    childByName.push(new Map());
    tree.children[parent].push(index);
    return index;
  };
  for (let t = 0; t < table.topics.length; t++) {
    const segments = table.topics[t].split("/");
    let node = 0;
    for (let level = 0; level < segments.length; level++) {
      let child = childByName[node].get(segments[level]);
      if (child === undefined) {
        child = add(node, segments[level], segments.slice(0, level + 1).join("/"), -1, 0);
        childByName[node].set(segments[level], child);
        tree.lo[child] = t;
      }
      node = child;
    }
    tree.topic[node] = t;
  }
  // A topic with topics below it: its own bytes move to an "itself" cell, its first child.
  const count = tree.name.length;
  for (let node = 1; node < count; node++) {
    if (tree.topic[node] < 0 || tree.children[node].length === 0) continue;
    const self = add(node, tree.name[node], tree.path[node], tree.topic[node], 1);
    tree.children[node].pop();
    tree.children[node].unshift(self);
    tree.topic[node] = -1;
  }
  // Topic ranges, bottom up (children were created after their parents).
  for (let node = tree.name.length - 1; node > 0; node--) {
    if (tree.children[node].length === 0) tree.hi[node] = tree.topic[node] + 1;
    const parent = tree.parent[node];
    tree.hi[parent] = Math.max(tree.hi[parent], tree.hi[node]);
  }
  tree.count = tree.name.length;
  tree.maxDepth = 1;
  for (const depth of tree.depth) tree.maxDepth = Math.max(tree.maxDepth, depth);
  // Levels every topic shares (a single prefix with nothing beside it) are not drawn: they would
  // be full-height columns saying nothing (see drawnRoot).
  tree.skipDepth = 0;
  for (
    let node = 0;
    tree.children[node].length === 1 && tree.children[tree.children[node][0]].length > 0;
    node = tree.children[node][0]
  )
    tree.skipDepth++;
  tree.nodeOfTopic = new Int32Array(table.topics.length);
  for (let node = 1; node < tree.count; node++)
    if (tree.children[node].length === 0) tree.nodeOfTopic[tree.topic[node]] = node;
  return tree;
}

/** The store of each node: a topic's store, a prefix's when all its topics share one, else -1. */
export function storesOfNodes(tree, storeOfTopic) {
  const store = new Int32Array(tree.count);
  for (let node = tree.count - 1; node >= 0; node--) {
    const children = tree.children[node];
    if (children.length === 0) {
      store[node] = storeOfTopic[tree.topic[node]];
      continue;
    }
    let shared = store[children[0]];
    for (const child of children) if (store[child] !== shared) shared = -1;
    store[node] = shared;
  }
  return store;
}

/** Weight of every node: its topics' bytes, or for `scale` "log" 1 + log10(1 + bytes) per topic. */
export function weightsOf(tree, table, scale) {
  const weight = new Float64Array(tree.count);
  for (let node = tree.count - 1; node > 0; node--) {
    if (tree.children[node].length === 0) {
      const bytes = table.bytes[tree.topic[node]];
      weight[node] = scale === "log" ? 1 + Math.log10(1 + bytes) : bytes;
    }
    weight[tree.parent[node]] += weight[node];
  }
  return weight;
}

/**
 * Lays out the subtree of `root` over `heightPx`: y0, y1 per node in it, and its nodes by depth
 * in top-to-bottom order (a pre-order walk meets each depth's nodes in y order).
 */
export function layoutFrom(tree, weight, root, heightPx) {
  const y0 = new Float64Array(tree.count);
  const y1 = new Float64Array(tree.count);
  y1[root] = heightPx;
  const pxPerWeight = weight[root] > 0 ? heightPx / weight[root] : 0;
  const byDepth = [];
  const stack = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    (byDepth[tree.depth[node]] ??= []).push(node);
    let at = y0[node];
    const children = tree.children[node];
    for (const child of children) {
      y0[child] = at;
      at += weight[child] * pxPerWeight;
      y1[child] = at;
    }
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
  }
  return { root, y0, y1, byDepth };
}

/** The node the picture starts from: `focus`, or below the levels every topic shares. */
export function drawnRoot(tree, focus) {
  if (focus !== 0) return focus;
  let node = 0;
  while (tree.depth[node] < tree.skipDepth) node = tree.children[node][0];
  return node;
}

/**
 * Draws the icicle of `layout.root`'s subtree into `target` (an <svg>), replacing what it held.
 * `colorOfNode(node)` gives a fill; `marks` lists {topic, kind} cells to outline;
 * `onHover(node | -1, event)` follows the mouse and `onZoom(node)` hears clicks on prefixes.
 * Cells thinner than CELL_MIN_PX are drawn as strips of neighbours: their store's colour when
 * they share one, MIXED_FILL when not, so a big table reads as colour, not as hairlines.
 */
export function drawIcicle(target, tree, layout, options) {
  const { widthPx, heightPx, colorOfNode, labelOfNode, marks, onHover, onZoom } = options;
  target.replaceChildren();
  target.setAttribute("viewBox", `0 0 ${widthPx} ${heightPx}`);
  target.setAttribute("height", String(heightPx));
  const rootDepth = tree.depth[layout.root];
  const columns = Math.max(1, layout.byDepth.length - 1 - rootDepth);
  const columnPx = (widthPx - PIN_WIDTH) / columns;
  const xOf = (node) => (tree.depth[node] - 1 - rootDepth) * columnPx;
  const cells = new Map();
  const cellLayer = svg("g");
  const textLayer = svg("g");
  for (let depth = rootDepth + 1; depth < layout.byDepth.length; depth++) {
    const x = (depth - 1 - rootDepth) * columnPx;
    let strip = null;
    const flush = () => {
      if (strip === null) return;
      cellLayer.append(
        svg("rect", {
          class: "strip",
          x: x.toFixed(1),
          y: strip.y0.toFixed(2),
          width: columnPx.toFixed(1),
          height: (strip.y1 - strip.y0).toFixed(2),
          fill: strip.fill,
        }),
      );
      strip = null;
    };
    for (const node of layout.byDepth[depth]) {
      const y0 = layout.y0[node];
      const height = layout.y1[node] - y0;
      if (height < CELL_MIN_PX) {
        const fill = colorOfNode(node);
        if (strip !== null && y0 - strip.y1 > 0.01) flush(); // a gap: a shallower topic ended here
        if (strip === null) strip = { y0, y1: y0 + height, fill };
        else {
          strip.y1 = y0 + height;
          if (strip.fill !== fill) strip.fill = MIXED_FILL;
        }
        if (strip.y1 - strip.y0 >= CELL_MIN_PX) flush();
        continue;
      }
      flush();
      const fill = colorOfNode(node);
      const rect = svg("rect", {
        class: tree.children[node].length > 0 ? "cell zoom" : "cell",
        x: x.toFixed(1),
        y: y0.toFixed(2),
        width: columnPx.toFixed(1),
        height: height.toFixed(2),
        fill,
        "data-node": node,
      });
      cellLayer.append(rect);
      cells.set(node, rect);
      if (height >= LABEL_MIN_PX && columnPx >= 28) {
        const label = fitLabel(labelOfNode(node), columnPx - 8);
        if (label === "") continue;
        const text = svg("text", {
          x: (x + 5).toFixed(1),
          y: (y0 + height / 2).toFixed(1),
          class: isDark(fill) ? "light" : "dark",
        });
        text.textContent = label;
        textLayer.append(text);
      }
    }
    flush();
  }
  target.append(cellLayer, textLayer);
  for (const { topic, kind } of marks) {
    const node = tree.nodeOfTopic[topic];
    if (!(tree.lo[layout.root] <= topic && topic < tree.hi[layout.root])) continue; // zoomed elsewhere
    const x = xOf(node);
    const y0 = layout.y0[node];
    const height = Math.max(3, layout.y1[node] - y0);
    const middle = (y0 + layout.y1[node]) / 2;
    target.append(
      svg("rect", {
        class: `hl ${kind}`,
        x: (x + 1.5).toFixed(1),
        y: (middle - height / 2 + 1.5).toFixed(2),
        width: (columnPx - 3).toFixed(1),
        height: Math.max(1, height - 3).toFixed(2),
        "data-mark": kind,
      }),
    );
    const tip = widthPx - PIN_WIDTH + 1;
    target.append(
      svg("path", {
        class: `pin ${kind}`,
        d: `M${tip},${middle.toFixed(1)} l${PIN_WIDTH - 2},-6 v12 z`,
      }),
    );
  }
  let hovered = -1;
  const setHover = (node) => {
    if (node === hovered) return;
    cells.get(hovered)?.classList.remove("hover");
    cells.get(node)?.classList.add("hover");
    hovered = node;
  };
  const nodeAt = (event) =>
    event.target instanceof SVGRectElement && event.target.dataset.node !== undefined
      ? Number(event.target.dataset.node)
      : -1;
  target.onmousemove = (event) => {
    const node = nodeAt(event);
    setHover(node);
    onHover(node, event);
  };
  target.onmouseleave = (event) => {
    setHover(-1);
    onHover(-1, event);
  };
  target.onclick = (event) => {
    const node = nodeAt(event);
    if (node >= 0 && tree.children[node].length > 0) onZoom(node);
  };
  return {
    /** Outlines `node` as hovered (from the other panel), or nothing for -1. */
    setHover,
  };
}

/** Cuts a label to about `widthPx` (10.5 px system font: ~6 px a character). */
function fitLabel(text, widthPx) {
  const chars = Math.floor(widthPx / 6);
  if (chars < 3) return "";
  return text.length <= chars ? text : `${text.slice(0, chars - 1)}…`;
}

/** Whether white text reads better than dark on `fill` (#rrggbb or hsl(... l%)). */
function isDark(fill) {
  if (fill.startsWith("hsl")) return Number(/(\d+)%\)$/.exec(fill)?.[1] ?? 100) < 55;
  const value = Number.parseInt(fill.slice(1), 16);
  const [r, g, b] = [(value >> 16) & 255, (value >> 8) & 255, value & 255];
  return 0.299 * r + 0.587 * g + 0.114 * b < 150;
}
