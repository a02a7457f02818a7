/**
 * Test certificates made with `openssl` at run time in a temp dir (never checked in, so none
 * expires in the tree): a CA; a server certificate for 127.0.0.1 (IP SAN, and DNS localhost);
 * an expired one for 127.0.0.1; one for another host; a client certificate (CN=alice,
 * O=Example) signed by the CA; and a self-signed client certificate no server trusts.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The files of the test PKI, by role: `X.pem` (certificate) and `X.key` (its key). */
export interface TestCerts {
  dir: string;
  /** Absolute path of `name` in the dir, e.g. path("server.pem"). */
  path(name: string): string;
  /** The text of `name`. */
  text(name: string): string;
  remove(): void;
}

/** The openssl npm test's set-up installs (scripts/test_setup.ts). */
export const OPENSSL = "/usr/bin/openssl";

/** Runs openssl with `args` in `dir`; throws with its stderr when it fails. */
function openssl(dir: string, args: string[]): void {
  const run = Bun.spawnSync([OPENSSL, ...args], { cwd: dir, stdout: "pipe", stderr: "pipe" });
  if (run.exitCode !== 0)
    throw new Error(`openssl ${args.join(" ")} failed: ${run.stderr.toString()}`);
}

/** A key and certificate `name` for `subject` and `san`, signed by the CA (`days` < 0: expired). */
function issue(dir: string, name: string, subject: string, san: string, days: number): void {
  openssl(
    dir,
    ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`].concat([
      "-out",
      `${name}.csr`,
      "-subj",
      subject,
    ]),
  );
  writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
  openssl(
    dir,
    ["x509", "-req", "-in", `${name}.csr`, "-CA", "ca.pem", "-CAkey", "ca.key"]
      .concat(["-CAcreateserial", "-out", `${name}.pem`, "-days", String(days)])
      .concat(["-extfile", `${name}.ext`]),
  );
}

/** Makes the test PKI in a fresh temp dir (about half a second: six RSA keys). */
export function makeTestCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), "aria-tls-"));
  openssl(
    dir,
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key"].concat([
      "-out",
      "ca.pem",
      "-days",
      "2",
      "-subj",
      "/CN=Aria Test CA",
    ]),
  );
  issue(dir, "server", "/CN=127.0.0.1", "IP:127.0.0.1,DNS:localhost", 2);
  // -days -1: not after is a day before now, so the certificate is expired from the start.
  issue(dir, "expired", "/CN=127.0.0.1", "IP:127.0.0.1,DNS:localhost", -1);
  issue(dir, "other", "/CN=other.example", "DNS:other.example", 2);
  issue(dir, "client", "/CN=alice/O=Example", "DNS:alice", 2);
  openssl(
    dir,
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "stranger.key"].concat([
      "-out",
      "stranger.pem",
      "-days",
      "2",
      "-subj",
      "/CN=stranger",
    ]),
  );
  return {
    dir,
    path: (name) => join(dir, name),
    text: (name) => readFileSync(join(dir, name), "utf8"),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
