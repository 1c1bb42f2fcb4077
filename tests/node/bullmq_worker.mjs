// A real BullMQ producer and worker for lockguard's evidence tests, driven by tests/node/bullmq.py.
//
//   node bullmq_worker.mjs add  --port P --queue Q [--prefix bull] --jobs '[[N, {opts}], ...]'
//   node bullmq_worker.mjs pause --port P --queue Q [--prefix bull]
//   node bullmq_worker.mjs schedule --port P --queue Q [--prefix bull] --scheduler ID
//   node bullmq_worker.mjs listen --port P --queue Q [--prefix bull]
//   node bullmq_worker.mjs work --port P --queue Q [--prefix bull] [--name W]
//                               [--lock-duration MS] [--lock-renew MS] [--rate-limit]
//                               [--stalled-interval MS]
//
// `add` adds, for each [N, opts] of --jobs, N jobs with BullMQ's `Queue.add(name, data, opts)`
// (opts are BullMQ's own job options: `priority`, `delay`, `deduplication: {id, ttl}`, ...),
// prints one JSON line {"event":"added","ids":[...]} and exits.
// `pause` pauses the queue with BullMQ's `Queue.pause` (5.x moves `wait` to `paused`, 6.x keeps
// the jobs in `wait` and marks `meta`).
// `schedule` upserts a job scheduler `ID` (every hour, its first job due now, job id
// `repeat:<ID>:<millis>`) and prints {"event":"scheduled","id":<that job id>}.
// `listen` runs a QueueEvents listener (a connection named `<prefix>:<base64 queue>:qe`, no
// worker) and prints {"event":"listening","pid":..} once connected.
// `work` runs one Worker (concurrency 1, the worker `name` option only when --name is given)
// whose processor never returns: the job it takes stays active and its lock
// `<prefix>:<queue>:<id>:lock` is held and renewed every lockRenewTime (`--rate-limit`: a
// limiter of 1000 jobs an hour, kept in `<prefix>:<queue>:limiter`; `--stalled-interval`: how
// often it runs the stalled check, which sets `<prefix>:<queue>:stalled-check` for that long).
// It prints {"event":"active","job":..,"token":..,"pid":..} once it holds that job.
// `listen` and `work` exit on SIGTERM / SIGINT without cleaning up (SIGKILL is the test's
// "worker died").
//
// Every command takes --cluster: P is then any node of a Redis Cluster (an ioredis Cluster
// connection; BullMQ needs a hash-tag prefix there, such as `{jobs}`).
//
// BULLMQ_PACKAGE picks the installed package: `bullmq` (6.x, default) or `bullmq5` (5.x); the
// ioredis used for --cluster is the one that package resolves.

import { createRequire } from "node:module";
import { parseArgs } from "node:util";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    port: { type: "string" },
    queue: { type: "string" },
    prefix: { type: "string", default: "bull" },
    jobs: { type: "string", default: "[]" },
    "rate-limit": { type: "boolean", default: false },
    "stalled-interval": { type: "string" },
    name: { type: "string" },
    scheduler: { type: "string" },
    "lock-duration": { type: "string", default: "30000" },
    "lock-renew": { type: "string" },
    cluster: { type: "boolean", default: false },
  },
});

const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const fail = (msg) => {
  process.stderr.write(`bullmq_worker: ${msg}\n`);
  process.exit(2);
};
const int = (name) => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 0) fail(`--${name} must be a whole number, got ${values[name]}`);
  return n;
};

const [command] = positionals;
if (!values.port || !values.queue) fail("--port and --queue are required");
const bullmq = process.env.BULLMQ_PACKAGE || "bullmq";
const { Queue, QueueEvents, Worker } = await import(bullmq);
const node = { host: "127.0.0.1", port: int("port") };
let connection = { ...node, maxRetriesPerRequest: null };
if (values.cluster) {
  const here = createRequire(import.meta.url);
  const { Cluster } = createRequire(here.resolve(bullmq))("ioredis");
  connection = new Cluster([node], { redisOptions: { maxRetriesPerRequest: null } });
}

for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));

if (command === "add") {
  let groups;
  try {
    groups = JSON.parse(values.jobs);
  } catch (err) {
    fail(`--jobs is not JSON: ${err.message}`);
  }
  const valid = ([n, opts]) => Number.isInteger(n) && n >= 0 && opts && typeof opts === "object";
  if (!Array.isArray(groups) || !groups.every(valid)) fail("--jobs must be [[count, {opts}], ...]");
  const queue = new Queue(values.queue, { connection, prefix: values.prefix });
  const ids = [];
  for (const [count, opts] of groups) {
    for (let i = 0; i < count; i++) ids.push((await queue.add("send", { n: ids.length }, opts)).id);
  }
  await queue.close();
  say({ event: "added", ids });
  process.exit(0);
} else if (command === "pause") {
  const queue = new Queue(values.queue, { connection, prefix: values.prefix });
  await queue.pause();
  await queue.close();
  say({ event: "paused" });
  process.exit(0);
} else if (command === "schedule") {
  if (!values.scheduler) fail("schedule needs --scheduler");
  const queue = new Queue(values.queue, { connection, prefix: values.prefix });
  const job = await queue.upsertJobScheduler(values.scheduler, { every: 3600000 }, { name: "digest" });
  await queue.close();
  say({ event: "scheduled", id: job.id });
  process.exit(0);
} else if (command === "listen") {
  const events = new QueueEvents(values.queue, { connection, prefix: values.prefix });
  await events.waitUntilReady();
  say({ event: "listening", pid: process.pid });
} else if (command === "work") {
  const lockDuration = int("lock-duration");
  const opts = { connection, prefix: values.prefix, concurrency: 1, lockDuration };
  if (values["lock-renew"] !== undefined) opts.lockRenewTime = int("lock-renew");
  if (values.name !== undefined) opts.name = values.name;
  if (values["rate-limit"]) opts.limiter = { max: 1000, duration: 3600000 };
  if (values["stalled-interval"] !== undefined) opts.stalledInterval = int("stalled-interval");
  const worker = new Worker(
    values.queue,
    async (job, token) => {
      say({ event: "active", job: job.id, token, pid: process.pid });
      await new Promise(() => {}); // hangs: the job stays active, its lock held and renewed
    },
    opts,
  );
  worker.on("error", (err) => process.stderr.write(`bullmq_worker: ${err}\n`));
} else {
  fail(`unknown command ${command}: use add, pause, schedule, listen or work`);
}
