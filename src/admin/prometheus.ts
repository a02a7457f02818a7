/**
 * PrometheusText: writes the Prometheus text exposition format (version 0.0.4): per family one
 * `# HELP` and one `# TYPE` line, then its samples, label values escaped. Pure string building;
 * what to expose is decided in metrics.ts.
 */

/** The content type of the text format. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Metric types the server exposes. */
export type MetricType = "counter" | "gauge" | "histogram";

/** Label names to values, in the order written. */
export type Labels = Readonly<Record<string, string>>;

/** Builds one exposition document. */
export class PrometheusText {
  private readonly lines: string[] = [];

  /** Starts a family: its HELP and TYPE lines. */
  family(name: string, type: MetricType, help: string): this {
    this.lines.push(
      `# HELP ${name} ${help.replaceAll("\\", "\\\\").replaceAll("\n", "\\n")}`,
      `# TYPE ${name} ${type}`,
    );
    return this;
  }

  /** One sample line. */
  sample(name: string, value: number, labels?: Labels): this {
    this.lines.push(`${name}${labelText(labels)} ${numberText(value)}`);
    return this;
  }

  /** A family of one unlabelled sample. */
  single(name: string, type: MetricType, help: string, value: number): this {
    return this.family(name, type, help).sample(name, value);
  }

  /** A free comment line (parsers ignore it). */
  comment(text: string): this {
    this.lines.push(`# ${text}`);
    return this;
  }

  /** The document, newline-terminated. */
  text(): string {
    return `${this.lines.join("\n")}\n`;
  }
}

function labelText(labels: Labels | undefined): string {
  if (labels === undefined) return "";
  const parts = Object.entries(labels).map(([key, value]) => `${key}="${escapeLabel(value)}"`);
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

/** Escapes a label value: backslash, double quote and newline. */
export function escapeLabel(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

/** A sample value: integers exactly, infinities and NaN as the format spells them. */
export function numberText(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}
