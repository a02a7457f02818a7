/** The `aria` binary's entry: hands the command line to src/cli and exits with its code. */
import { runCli } from "./src/cli/mod.ts";
import { processExit, processArgs } from "./src/runtime/process.ts";

processExit(await runCli(processArgs()));
