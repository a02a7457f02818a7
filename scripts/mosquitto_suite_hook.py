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
  - with $MOSQ_SUITE_CONNACK_PROPERTIES (hex: the properties the broker under test puts in the
    CONNACK of a plain MQTT 5 CONNECT), mosq_test.gen_connack's property helper, which adds
    mosquitto's defaults (topic alias maximum 10, receive maximum 20: its own server limits) to
    every expected MQTT 5 CONNACK, adds those instead, merged with the properties the test itself
    expects and written in identifier order (MQTT gives property order no meaning; Aria writes
    them in that order). Every other expected packet stays as the suite generates it.
It does not change the suite's files or any other check: the test runs as the suite wrote it.
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


BYTE_PROPERTIES = {0x01, 0x17, 0x19, 0x24, 0x25, 0x28, 0x29, 0x2A}
U16_PROPERTIES = {0x13, 0x21, 0x22, 0x23}
U32_PROPERTIES = {0x02, 0x11, 0x18, 0x27}
VARINT_PROPERTIES = {0x0B}
PAIR_PROPERTIES = {0x26}


def split_properties(data):
    """The (identifier, bytes) of each property of an MQTT 5 property list (no length prefix)."""
    properties = []
    at = 0
    while at < len(data):
        start = at
        identifier = data[at]
        at += 1
        if identifier in BYTE_PROPERTIES:
            at += 1
        elif identifier in U16_PROPERTIES:
            at += 2
        elif identifier in U32_PROPERTIES:
            at += 4
        elif identifier in VARINT_PROPERTIES:
            while data[at] & 0x80:
                at += 1
            at += 1
        else:  # a string or binary data; a user property is two strings
            for _ in range(2 if identifier in PAIR_PROPERTIES else 1):
                at += 2 + int.from_bytes(data[at : at + 2], "big")
        properties.append((identifier, data[start:at]))
    return properties


def use_connack_defaults(mosq_test, defaults):
    """Makes gen_connack's property helper add `defaults` instead of mosquitto's own."""
    original = mosq_test.gen_connack

    def gen_connack(flags=0, rc=0, proto_ver=4, properties=b"", property_helper=True):
        if proto_ver != 5 or not property_helper or properties is None:
            return original(flags, rc, proto_ver, properties, property_helper)
        expected = split_properties(properties)
        named = {identifier for identifier, _ in expected}
        merged = expected + [p for p in defaults if p[0] not in named]
        merged.sort(key=lambda p: p[0])
        return original(flags, rc, proto_ver, b"".join(p[1] for p in merged), False)

    mosq_test.gen_connack = gen_connack


def say_why_no_packet(mosq_test):
    """Prints a FAIL line when an expected packet never comes (a timeout, a closed connection):
    many tests end in `finally: exit(rc)`, which hides the exception that said so."""
    original = mosq_test.expect_packet

    def expect_packet(sock, name, expected):
        try:
            return original(sock, name, expected)
        except (OSError, ValueError) as error:
            print("FAIL: no %s: %s %s" % (name, type(error).__name__, error))
            sys.stdout.flush()
            raise

    mosq_test.expect_packet = expect_packet


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
    sys.path.insert(0, os.path.dirname(os.path.dirname(test)))
    import mosq_test

    say_why_no_packet(mosq_test)
    defaults = os.environ.get("MOSQ_SUITE_CONNACK_PROPERTIES")
    if defaults is not None:
        use_connack_defaults(mosq_test, split_properties(bytes.fromhex(defaults)))
    runpy.run_path(test, run_name="__main__")


if __name__ == "__main__":
    main()
