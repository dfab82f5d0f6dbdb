// Dolos's similarity of every pair of answers, one exercise at a time (bench/similarity_dolos.py).
//
//   node bench/dolos_compare.mjs DOLOS_DIR INPUT.json
//
// DOLOS_DIR: where @dodona/dolos-lib is installed (DOLOS_DIR/node_modules/@dodona/dolos-lib).
// INPUT.json: {"options": {kgramLength, kgramsInWindow, maxFingerprintPercentage},
//              "groups": [{"id": ..., "stub": ..., "answers": [{"name": ..., "text": ...}]}]}
// Prints {"pairs": {id: [[name, name, similarity], ...]}, "seconds": ..., "version": ...}: every
// pair that shares a fingerprint, with Dolos's similarity (the share of both answers' fingerprints
// the other holds); the release's stub is Dolos's ignored file (its fingerprints never count), and
// maxFingerprintPercentage leaves out what more than that share of the class holds.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [dir, input] = process.argv.slice(2);
const lib = join(dir, "node_modules", "@dodona", "dolos-lib");
const { Dolos, File } = await import(pathToFileURL(join(lib, "dist", "index.js")).href);
const version = JSON.parse(readFileSync(join(lib, "package.json"), "utf8")).version;
const { options, groups } = JSON.parse(readFileSync(input, "utf8"));

const start = process.hrtime.bigint();
const pairs = {};
for (const group of groups) {
  pairs[group.id] = [];
  if (group.answers.length < 2) continue;
  const dolos = new Dolos({
    language: "python",
    kgramLength: options.kgramLength,
    kgramsInWindow: options.kgramsInWindow,
    // Dolos refuses a share with two files (each fingerprint is then in 100 % of them)
    maxFingerprintPercentage: group.answers.length > 2 ? options.maxFingerprintPercentage : null,
  });
  const files = group.answers.map(a => new File(`${a.name}.py`, a.text));
  const stub = group.stub.trim() ? new File("release_stub.py", group.stub) : undefined;
  const report = await dolos.analyze(files, group.id, stub);
  for (const pair of report.allPairs()) {
    pairs[group.id].push([pair.leftFile.path.slice(0, -3), pair.rightFile.path.slice(0, -3),
                          pair.similarity]);
  }
}
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
process.stdout.write(JSON.stringify({ pairs, seconds, version }));
