/** The `aria` binary's entry: hands the command line to src/cli and exits with its code. */
import { runCli } from "./src/cli/mod.ts";
import { runtime } from "./src/runtime/current_runtime.ts";

runtime.exit(await runCli(runtime.args()));
