"""Runs one test of mosquitto's broker suite (test/broker/NAME.py) with the broker it starts
swapped for another, for scripts/mosquitto_suite.ts.

Usage: python3 mosquitto_suite_hook.py TEST.py [PORT ...]  (cwd: the suite's test/broker)

The seam: the suite starts its broker through mosq_test.start_broker, which runs
subprocess.Popen(['/usr/sbin/mosquitto', '-v', '-p', PORT]) (an absolute path, so a fake
`mosquitto` first on PATH would not be seen), or ['/usr/sbin/mosquitto', '-v', '-c', CONF] when
the test needs a configuration file. This hook replaces subprocess.Popen before the test runs:
  - every start of /usr/sbin/mosquitto is appended as a JSON line to $MOSQ_SUITE_RECORD (which
    arguments, and a config file's directives), so a run against the real broker says which tests
    need mosquitto's config files;
  - with $MOSQ_SUITE_BROKER (a JSON argv with {port} and {data} placeholders) a start with
    `-p PORT` runs that argv instead, on the port the test wants, with a fresh directory made under
    $MOSQ_SUITE_DATA; a start with `-c CONF` ends the test at once with exit 77 (does not apply:
    the broker under test has no mosquitto config file).
It does not change the suite's files, its packets or its checks: the test runs as the suite wrote it.
"""

import json
import os
import runpy
import subprocess
import sys
import tempfile

MOSQUITTO = "/usr/sbin/mosquitto"
DOES_NOT_APPLY = 77


def config_directives(path):
    """The directive lines of a mosquitto config file (comments and blank lines left out)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = [line.strip() for line in handle]
    except OSError as error:
        return ["<unreadable: %s>" % error]
    return [line for line in lines if line and not line.startswith("#")]


def record(entry):
    path = os.environ.get("MOSQ_SUITE_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


def option(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def broker_argv(argv):
    """The argv to run for a start of mosquitto with `argv` (mosquitto's own when not swapped)."""
    config = option(argv, "-c")
    record({"argv": argv[1:], "config": config_directives(config) if config else None})
    template = os.environ.get("MOSQ_SUITE_BROKER")
    if not template:
        return argv
    port = option(argv, "-p")
    if config is not None or port is None:
        sys.stdout.write("mosquitto_suite: does not apply: needs mosquitto's config file\n")
        sys.stdout.flush()
        os._exit(DOES_NOT_APPLY)
    data = tempfile.mkdtemp(prefix="broker-", dir=os.environ.get("MOSQ_SUITE_DATA"))
    return [part.replace("{port}", port).replace("{data}", data) for part in json.loads(template)]


class BrokerPopen(subprocess.Popen):
    def __init__(self, args, *rest, **kwargs):
        if isinstance(args, (list, tuple)) and len(args) > 0 and args[0] == MOSQUITTO:
            args = broker_argv(list(args))
        super().__init__(args, *rest, **kwargs)


def main():
    test = os.path.abspath(sys.argv[1])
    subprocess.Popen = BrokerPopen
    sys.argv = [test] + sys.argv[2:]
    sys.path.insert(0, os.path.dirname(test))
    runpy.run_path(test, run_name="__main__")


if __name__ == "__main__":
    main()
