/**
 * process_stats: what `/metrics` says about the server's process — resident memory, CPU time,
 * open files and their limit, start time — read with node:process and Linux's /proc (Bun and Deno
 * both implement them). Not here: rendering (src/admin/metrics.ts). Never throws: what this
 * system cannot tell is left out (null).
 */
import { readdirSync, readFileSync } from "node:fs";
import process from "node:process";
import type { ProcessView } from "../admin/ports.ts";

/** The process's resources now: the admin app's view of them (src/admin/ports.ts). */
export type ProcessStats = ProcessView;

const startTimeSeconds = Date.now() / 1000 - process.uptime();

/** Reads the process's resources (a directory listing of /proc/self/fd: ~µs per open file). */
export function processStats(): ProcessStats {
  const cpu = process.cpuUsage();
  return {
    residentBytes: process.memoryUsage.rss(),
    cpuUserSeconds: cpu.user / 1e6,
    cpuSystemSeconds: cpu.system / 1e6,
    openFiles: openFiles(),
    openFilesMax: openFilesMax(),
    startTimeSeconds,
  };
}

function openFiles(): number | null {
  try {
    // The listing's own descriptor is among them.
    return readdirSync("/proc/self/fd").length - 1;
  } catch {
    return null;
  }
}

function openFilesMax(): number | null {
  try {
    const limits = readFileSync("/proc/self/limits", "utf8");
    const soft = /^Max open files\s+(\d+|unlimited)/m.exec(limits)?.[1];
    return soft === undefined || soft === "unlimited" ? null : Number(soft);
  } catch {
    return null;
  }
}
