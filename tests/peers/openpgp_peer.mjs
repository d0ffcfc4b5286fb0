// OpenPGP.js as a test peer: reads a JSON list of jobs on stdin, writes a JSON list of
// results on stdout. Run with `node openpgp_peer.mjs` and NODE_PATH (or a node_modules
// folder above) providing the `openpgp` package.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.OPENPGP_PREFIX || process.cwd(), "x.js"));
const openpgp = require("openpgp");

const KINDS = {
  rsa2048: { type: "rsa", rsaBits: 2048 },
  rsa3072: { type: "rsa", rsaBits: 3072 },
  rsa4096: { type: "rsa", rsaBits: 4096 },
  cv25519: { type: "ecc", curve: "curve25519Legacy" },
  p256: { type: "ecc", curve: "nistP256" },
  p384: { type: "ecc", curve: "nistP384" },
  p521: { type: "ecc", curve: "nistP521" },
  x25519: { type: "curve25519" },
  x448: { type: "curve448" },
  default: {},
};

const at = (seconds) => (seconds ? new Date(seconds * 1000) : undefined);

async function generate(job) {
  const base = { ...KINDS[job.kind || "default"] };
  // Jobs: {op: "generate", kind, created, expires, subkeys: [{kind, created, expires}],
  // revoke: [subkey index ...], revokedAt}; times in seconds since the epoch. The first
  // subkey is made with the primary key, the others added later at their own time.
  const subkeys = (job.subkeys || [{}]).map((s) => ({
    ...(s.kind ? KINDS[s.kind] : {}),
    ...(s.expires ? { keyExpirationTime: s.expires } : {}),
    ...(s.created ? { date: at(s.created) } : {}),
  }));
  const first = subkeys.shift() || {};
  let { privateKey } = await openpgp.generateKey({
    ...base,
    userIDs: [{ name: "Provider OpenPGP.js", email: "js@provider.test" }],
    date: at(job.created),
    keyExpirationTime: job.expires || 0,
    subkeys: [first],
    format: "object",
  });
  for (const extra of subkeys) {
    privateKey = await privateKey.addSubkey(extra);
  }
  for (const index of job.revoke || []) {
    const revoked = await privateKey.subkeys[index].revoke(privateKey.keyPacket, {}, at(job.revokedAt));
    privateKey.subkeys[index] = revoked;
  }
  return {
    secret: privateKey.armor(),
    public: privateKey.toPublic().armor(),
    subkeys: privateKey.subkeys.map((s) => s.getFingerprint().toUpperCase()),
    fingerprint: privateKey.getFingerprint().toUpperCase(),
  };
}

async function decrypt(job) {
  const decryptionKeys = await openpgp.readPrivateKey({ armoredKey: job.secret });
  const message = await openpgp.readMessage({ armoredMessage: job.message });
  const { data } = await openpgp.decrypt({ message, decryptionKeys, format: "binary" });
  return { plaintext: Buffer.from(data).toString("base64") };
}

async function encrypt(job) {
  const encryptionKeys = await openpgp.readKey({ armoredKey: job.public });
  const message = await openpgp.createMessage({ binary: Buffer.from(job.plaintext, "base64") });
  const armored = await openpgp.encrypt({ message, encryptionKeys });
  return { message: armored };
}

const OPS = { generate, decrypt, encrypt };
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const jobs = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const results = [];
for (const job of jobs) {
  try {
    results.push({ ok: true, ...(await OPS[job.op](job)) });
  } catch (error) {
    results.push({ ok: false, error: String(error && error.message ? error.message : error) });
  }
}
process.stdout.write(JSON.stringify(results));
