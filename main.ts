/**
 * The `aria` binary's entry: hands the command line to src/cli and exits with its code, once
 * standard output and standard error have drained (a large output through a pipe arrives whole).
 */
import { runCli } from "./src/cli/mod.ts";
import { runtime } from "./src/runtime/mod.ts";

await runtime.exit(await runCli(runtime.args()));
