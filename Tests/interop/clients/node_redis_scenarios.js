// node-redis (Debian's node-redis package) against actorkvd: issue #21's scenario set, with the
// client's default settings (createClient({ socket: { path } }); node-redis 4 speaks RESP2).
//
//   NODE_PATH=/usr/share/nodejs node node_redis_scenarios.js SOCKET
//
// Prints TAP-like `ok - ...` / `not ok - ...` lines (diagnostics as `#   ...`); exits 1 if any
// check failed. EXPECT_SERVER=redis runs the scenarios against a real redis-server (ActorKV's own
// error texts and CROSSNS skipped), to check the scenarios themselves.
'use strict';
const { fork } = require('child_process');
const redis = require('redis');

const SOCK = process.argv[2];
const EXPECT_SERVER = process.env.EXPECT_SERVER || 'actorkv';
const ACTORKV = EXPECT_SERVER === 'actorkv';
const TAG = process.env.RUN_TAG || String(process.pid);
const SCENARIO_LIMIT = Number(process.env.SCENARIO_LIMIT || 40) * 1000;
const UNKNOWN_TEXT = 'ActorKV keeps keys in namespaces: see protocol.md "Differences from Redis"';
const MISSING = ACTORKV ? 'LPUSH' : 'NOSUCHCOMMAND';
const STABLE = 10000;
const WORKERS = 4;
const INCREMENTS = 300;

let failures = 0;
const ok = (name) => console.log(`ok - node-redis: ${name}`);
function notOk(name, ...diagnostics) {
  failures += 1;
  console.log(`not ok - node-redis: ${name}`);
  for (const d of diagnostics) for (const line of String(d).split('\n')) console.log(`#   ${line}`);
}
function check(name, condition, ...diagnostics) {
  if (condition) ok(name); else notOk(name, ...diagnostics);
  return condition;
}
const show = (v) => JSON.stringify(v, (k, x) => (x === undefined ? '<undefined>' : x));
function expectEq(name, expected, actual) {
  return check(name, show(expected) === show(actual), `expected: ${show(expected)}`, `actual:   ${show(actual)}`);
}
async function expectError(name, call, ...needles) {
  let result;
  try {
    result = await call();
  } catch (error) {
    const text = String(error && error.message);
    const missing = needles.filter((n) => !text.includes(n));
    return check(name, missing.length === 0, `error: ${error && error.constructor.name}: ${text}`,
      ...missing.map((n) => `expected it to contain: ${n}`));
  }
  notOk(name, `no error; the call returned ${show(result)}`);
  return false;
}
const skip = (name) => console.log(`#   skip (EXPECT_SERVER=${EXPECT_SERVER}): ${name}`);
const ns = (scenario) => `node-${scenario}-${TAG}`;
// HGETALL's object, sorted, as plain JSON (node-redis builds it without a prototype).
const sorted = (obj) => Object.fromEntries(Object.entries(obj).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

async function connect() {
  const client = redis.createClient({ socket: { path: SOCK } });
  client.on('error', (error) => console.log(`#   client error event: ${error && error.message}`));
  await client.connect();
  return client;
}

const children = new Set();
function child(role, ...args) {
  const proc = fork(__filename, [SOCK, role, ...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  return proc;
}
const exited = (proc) => new Promise((resolve) => {
  if (proc.exitCode !== null) resolve(proc.exitCode); else proc.on('exit', (code) => resolve(code));
});
const message = (proc, type) => new Promise((resolve) => {
  const on = (m) => { if (m.type === type) { proc.off('message', on); resolve(m); } };
  proc.on('message', on);
});

// ---------------------------------------------------------------------------------------------
async function connectWithDefaults() {
  const r = await connect();
  expectEq('PING on a new connection', 'PONG', await r.ping());
  const id = await r.clientId();
  check('CLIENT ID is an integer', Number.isInteger(id), `CLIENT ID: ${show(id)}`);
  expectEq('CLIENT SETNAME', 'OK', await r.clientSetName('node-redis'));
  expectEq('CLIENT GETNAME', 'node-redis', await r.clientGetName());
  // node-redis 4 reads CLIENT INFO's fields by position, Redis 7's order (a shorter line made
  // clientInfo() throw a TypeError).
  let info;
  try {
    info = await r.clientInfo();
    ok('clientInfo() parses CLIENT INFO');
  } catch (error) {
    notOk('clientInfo() parses CLIENT INFO', `${error && error.constructor.name}: ${error && error.message}`);
  }
  if (info) {
    expectEq('clientInfo(): id is CLIENT ID', id, info.id);
    expectEq('clientInfo(): name', 'node-redis', info.name);
    expectEq('clientInfo(): db', 0, info.db);
    check('clientInfo(): addr, laddr and flags are text', [info.addr, info.laddr, info.flags].every((v) => typeof v === 'string' && v.length > 0),
      show(info));
    check('clientInfo(): fd, age and idle are numbers', [info.fd, info.age, info.idle].every(Number.isInteger), show(info));
  }
  const other = await connect();
  expectEq('a second client connects too', 'PONG', await other.ping());
  await other.quit();
  await r.quit();
}

async function hashCommands() {
  const r = await connect();
  const key = ns('hash');
  expectEq('HSET one new field -> 1', 1, await r.hSet(key, 'a', '1'));
  expectEq('HSET object of two new fields -> 2', 2, await r.hSet(key, { b: '2', c: '3' }));
  expectEq('HSET of an existing field -> 0', 0, await r.hSet(key, 'a', '10'));
  expectEq('HGET', '10', await r.hGet(key, 'a'));
  expectEq('HGET of a missing field -> null', null, await r.hGet(key, 'nope'));
  expectEq('HGETALL', { a: '10', b: '2', c: '3' }, sorted(await r.hGetAll(key)));
  expectEq('HDEL of one present and one missing field -> 1', 1, await r.hDel(key, ['b', 'nope']));
  expectEq('HGETALL after HDEL', { a: '10', c: '3' }, sorted(await r.hGetAll(key)));
  expectEq('HMGET', ['10', null, '3'], await r.hmGet(key, ['a', 'nope', 'c']));
  expectEq('HLEN', 2, await r.hLen(key));
  expectEq('HEXISTS present / missing', [true, false], [await r.hExists(key, 'a'), await r.hExists(key, 'b')]);
  expectEq('HSETNX new / existing', [true, false], [await r.hSetNX(key, 'd', '4'), await r.hSetNX(key, 'd', '5')]);
  expectEq('HINCRBY', 15, await r.hIncrBy(key, 'a', 5));
  expectEq('HKEYS', ['a', 'c', 'd'], (await r.hKeys(key)).sort());
  expectEq('HVALS', ['15', '3', '4'], (await r.hVals(key)).sort());
  const binary = Buffer.from([0, 0xff, 13, 10, 0x62, 0x80]);
  await r.hSet(key, 'bin', binary);
  const back = await r.hGet(redis.commandOptions({ returnBuffers: true }), key, 'bin');
  check('binary value round trip', Buffer.isBuffer(back) && back.equals(binary), `got: ${show(back)}`);
  expectEq('HGETALL of a hash nobody wrote -> {}', {}, sorted(await r.hGetAll(ns('never-written'))));
  const flat = await r.sendCommand(['HGETALL', key]);
  check('HGETALL arrives as a flat array (RESP2)', Array.isArray(flat) && flat.length === 8, `raw: ${show(flat)}`);
  await r.hSet(key, { 'm*x': '1', mAx: '2', 'm?x': '3', mbx: '4', mb: '5' });
  for (const [pattern, expected] of [['m*', ['m*x', 'm?x', 'mAx', 'mb', 'mbx']], ['m[a-zA]x', ['mAx', 'mbx']],
    ['m\\*x', ['m*x']], ['nothing*', []]]) {
    const got = [];
    for await (const { field } of r.hScanIterator(key, { MATCH: pattern })) got.push(field);
    expectEq(`hScanIterator({ MATCH: ${show(pattern)} })`, expected, got.sort());
  }
  await r.quit();
}

function checkStableOnce(name, seen) {
  const counts = new Map();
  const wrong = [];
  const unexpected = [];
  for (const [field, value] of seen) {
    if (field.startsWith('stable:')) {
      counts.set(field, (counts.get(field) || 0) + 1);
      if (value !== `value-${Number(field.slice(7))}`) wrong.push([field, value]);
    } else if (!field.startsWith('churn:')) unexpected.push(field);
  }
  const missing = [];
  for (let n = 0; n < STABLE; n++) {
    const f = `stable:${String(n).padStart(5, '0')}`;
    if (!counts.has(f)) missing.push(f);
  }
  const twice = [...counts].filter(([, c]) => c > 1).map(([f]) => f);
  return check(name, !missing.length && !twice.length && !wrong.length && !unexpected.length,
    `${missing.length} missing (first: ${show(missing.slice(0, 3))})`,
    `${twice.length} returned more than once (first: ${show(twice.slice(0, 3))})`,
    `${wrong.length} with a wrong value (first: ${show(wrong.slice(0, 3))})`,
    `${unexpected.length} unexpected fields (first: ${show(unexpected.slice(0, 3))})`);
}

async function churnWriter(key) {
  const r = await connect();
  let stop = false;
  process.on('message', (m) => { if (m.type === 'stop') stop = true; });
  let i = 0;
  while (!stop) {
    i += 1;
    await r.hSet(key, `churn:${i}`, String(i));
    if (i % 3 === 0) await r.hSet(key, `churn:${i - 1}`, 'rewritten');
    if (i > 40) await r.hDel(key, `churn:${i - 40}`);
    if (i === 50) process.send({ type: 'started' });
    if (i % 20 === 0) process.send({ type: 'count', count: i });
  }
  process.send({ type: 'done', count: i });
  await r.quit();
}

async function hscanUnderWrites() {
  const r = await connect();
  const key = ns('scan');
  for (let i = 0; i < STABLE; i += 1000) {
    const fields = {};
    for (let n = i; n < i + 1000; n++) fields[`stable:${String(n).padStart(5, '0')}`] = `value-${n}`;
    expectEq(`HSET of 1,000 fields at once (${i / 1000 + 1}/10)`, 1000, await r.hSet(key, fields));
  }
  expectEq('HLEN after the fill', STABLE, await r.hLen(key));
  const writer = child('churn', key);
  let writes = 0;
  writer.on('message', (m) => { if (m.count) writes = m.count; });
  try {
    await message(writer, 'started');
    let before = writes;
    const seen = [];
    for await (const { field, value } of r.hScanIterator(key)) seen.push([field, value]);
    let during = writes - before;
    checkStableOnce(`hScanIterator saw each of ${STABLE} stable fields exactly once, with its value, while another process wrote`, seen);
    check('the other process wrote while hScanIterator ran', during > 0, `writes during the scan: ${during}`);
    console.log(`#   hScanIterator: ${seen.length} pairs, ${during} concurrent writes`);

    // The pages of one scan asked on two connections in turn; raw replies, to see the cursors.
    const other = await connect();
    const clients = [r, other];
    let cursor = '0';
    let pages = 0;
    const pairs = [];
    const badCursors = [];
    before = writes;
    do {
      const [next, flat] = await clients[pages % 2].sendCommand(['HSCAN', key, cursor, 'COUNT', '500']);
      pages += 1;
      cursor = next;
      if (!/^[0-9]+$/.test(cursor) || BigInt(cursor) > 2n ** 53n) badCursors.push(cursor);
      for (let i = 0; i < flat.length; i += 2) pairs.push([flat[i], flat[i + 1]]);
    } while (cursor !== '0' && pages < 10000);
    during = writes - before;
    checkStableOnce('HSCAN pages alternating between two connections: each stable field exactly once, while another process wrote', pairs);
    check('every HSCAN cursor is an unsigned decimal integer <= 2^53', badCursors.length === 0, `bad cursors: ${show(badCursors.slice(0, 5))}`);
    check('the paging above took more than one page', pages > 1, `pages: ${pages}`);
    await other.quit();
  } finally {
    writer.send({ type: 'stop' });
  }
  expectEq('the writer process exited cleanly', 0, await exited(writer));
  await r.quit();
}

async function multiBatch() {
  const r = await connect();
  const key = ns('multi');
  await r.hSet(key, 'w', 'old');
  expectEq('multi() batch replies', [1, 2, 1, 5, '1', false],
    await r.multi().hSet(key, 'x', '1').hSet(key, { y: '2', z: '3' }).hDel(key, 'w').hIncrBy(key, 'n', 5)
      .hGet(key, 'x').hExists(key, 'w').exec());
  const before = { n: '5', x: '1', y: '2', z: '3' };
  expectEq('multi() batch applied', before, sorted(await r.hGetAll(key)));
  expectEq('multi() with ping() and echo() between hash commands', ['PONG', 1, 'hi', '1', 1],
    await r.multi().ping().hSet(key, 'e', '1').echo('hi').hGet(key, 'e').hDel(key, 'e').exec());
  await expectError('multi() with an unknown command rejects',
    () => r.multi().hSet(key, 'p', '1').addCommand([MISSING, key, 'q']).hSet(key, 'q', '1').exec(), 'unknown command');
  expectEq('... and applied none of its commands', before, sorted(await r.hGetAll(key)));
  if (ACTORKV) {
    await expectError('multi() over two hashes (namespaces) -> CROSSNS',
      () => r.multi().hSet(key, 'p', '1').hSet(ns('multi-other'), 'p', '1').exec(), 'CROSSNS');
    expectEq('... and applied nothing in the first', before, sorted(await r.hGetAll(key)));
    expectEq('... nor in the second', {}, sorted(await r.hGetAll(ns('multi-other'))));
    // Stronger than Redis (protocol.md): a command failing inside EXEC applies nothing.
    await r.hSet(key, 'text', 'not a number');
    await expectError('multi() whose HINCRBY fails at EXEC rejects',
      () => r.multi().hSet(key, 'p', '1').hIncrBy(key, 'text', 1).exec(), 'not an integer');
    expectEq('... and applied none of it (ActorKV rolls back; Redis would keep the HSET)',
      sorted({ ...before, text: 'not a number' }), sorted(await r.hGetAll(key)));
    await r.hDel(key, 'text');
  } else {
    skip('multi() over two hashes -> CROSSNS; a failing HINCRBY applies nothing');
  }
  expectEq('the connection is still usable', 'PONG', await r.ping());
  await r.quit();
}

async function incrWorker(key) {
  const r = await connect();
  let tries = 0;
  for (let done = 0; done < INCREMENTS;) {
    try {
      await r.executeIsolated(async (c) => {
        tries += 1;
        await c.watch(key);
        const value = Number(await c.hGet(key, 'counter') || 0);
        return c.multi().hSet(key, 'counter', String(value + 1)).exec();
      });
      done += 1;
    } catch (error) {
      if (!(error instanceof redis.WatchError)) throw error;
    }
  }
  process.send({ type: 'done', retries: tries - INCREMENTS });
  await r.quit();
}

async function transactions() {
  const r = await connect();
  const key = ns('tx');
  const other = await connect();
  await expectError('WATCH, another client writes the hash, EXEC -> WatchError', async () => {
    try {
      return await r.executeIsolated(async (c) => {
        await c.watch(key);
        await c.hGet(key, 'counter');
        await other.hSet(key, 'intruder', '1');
        return c.multi().hSet(key, 'counter', '99').exec();
      });
    } catch (error) {
      throw error instanceof redis.WatchError ? new Error('WatchError') : error;
    }
  }, 'WatchError');
  expectEq('... and the transaction\'s write was not applied', null, await r.hGet(key, 'counter'));
  expectEq('WATCH, a write to another hash, EXEC -> applied', [1], await r.executeIsolated(async (c) => {
    await c.watch(key);
    await other.hSet(ns('tx-elsewhere'), 'f', '1');
    return c.multi().hSet(key, 'counter', '0').exec();
  }));
  await r.hDel(key, 'counter');
  await other.quit();

  const start = Date.now();
  const workers = [];
  for (let i = 0; i < WORKERS; i++) workers.push(child('incr', key));
  let retries = 0;
  for (const w of workers) w.on('message', (m) => { if (m.type === 'done') retries += m.retries; });
  const codes = await Promise.all(workers.map(exited));
  expectEq(`${WORKERS} processes exited cleanly`, Array(WORKERS).fill(0), codes);
  expectEq(`${WORKERS} processes x ${INCREMENTS} WATCH/MULTI/EXEC increments of one field`,
    String(WORKERS * INCREMENTS), await r.hGet(key, 'counter'));
  console.log(`#   transactions: ${retries} WATCH retries, ${((Date.now() - start) / 1000).toFixed(1)}s`);
  await r.quit();
}

// The keyspace walks: a hash with fields is a key, one whose fields were all deleted is not.
async function keyspace() {
  const r = await connect();
  const [a, b, gone] = [ns('ksa'), ns('ksb'), ns('ksgone')];
  await r.hSet(a, 'f', '1');
  await r.hSet(b, { f: '1', g: '2' });
  await r.hSet(gone, 'f', '1');
  await r.hDel(gone, 'f');
  const pattern = `node-ks*-${TAG}`;
  const expected = [a, b].sort();
  const walked = [];
  for await (const key of r.scanIterator({ MATCH: pattern, COUNT: 1 })) walked.push(key);
  expectEq('scanIterator({ MATCH }) lists the hashes with fields, not the emptied one', expected, walked.sort());
  const hashes = [];
  for await (const key of r.scanIterator({ MATCH: pattern, TYPE: 'hash' })) hashes.push(key);
  expectEq('scanIterator({ TYPE: "hash" })', expected, hashes.sort());
  expectEq('keys(pattern)', expected, (await r.keys(pattern)).sort());
  if (ACTORKV) {
    const page = await r.scan(0);
    expectEq('scan(0) answers in one page, which dbSize() counts', [0, page.keys.length], [page.cursor, await r.dbSize()]);
  }
  expectEq('type(): hash / none', ['hash', 'none'], [await r.type(a), await r.type(gone)]);
  expectEq('exists() of one hash: with fields / emptied', [1, 0], [await r.exists(b), await r.exists(gone)]);
  await r.quit();
}

async function unknownCommands() {
  const r = await connect();
  const key = ns('unknown');
  await r.hSet(key, { a: '1', b: '2' });
  const before = sorted(await r.hGetAll(key));
  if (ACTORKV) {
    await expectError('set() rejects', () => r.set(key, 'x'), "unknown command 'SET'", UNKNOWN_TEXT);
    await expectError('lPush() rejects', () => r.lPush(key, 'x'), "unknown command 'LPUSH'", UNKNOWN_TEXT);
  }
  await expectError(`${MISSING} rejects`, () => r.sendCommand([MISSING, key, 'x']), 'unknown command');
  await expectError('HSET with no field rejects', () => r.sendCommand(['HSET', key]), 'wrong number of arguments');
  expectEq('... and the hash is untouched', before, sorted(await r.hGetAll(key)));
  expectEq('the connection is still usable', 'PONG', await r.ping());
  await r.quit();
}

async function run(scenario) {
  const start = Date.now();
  let timer;
  try {
    await Promise.race([scenario(), new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${SCENARIO_LIMIT / 1000} s`)), SCENARIO_LIMIT);
    })]);
  } catch (error) {
    notOk(`${scenario.name} ran to the end`, `${error && error.constructor.name}: ${error && error.message}`,
      ...String(error && error.stack).split('\n').slice(1, 4));
  } finally {
    clearTimeout(timer);
  }
  console.log(`#   ${scenario.name} took ${((Date.now() - start) / 1000).toFixed(1)}s`);
}

async function main() {
  const role = process.argv[3];
  // A child ends itself: its IPC channel to the parent would keep it alive.
  if (role === 'churn') { await churnWriter(process.argv[4]); process.exit(0); }
  if (role === 'incr') { await incrWorker(process.argv[4]); process.exit(0); }
  console.log(`# node-redis ${require('redis/package.json').version} (@redis/client ${require('@redis/client/package.json').version}), node ${process.version}`);
  for (const scenario of [connectWithDefaults, hashCommands, hscanUnderWrites, multiBatch, transactions, keyspace, unknownCommands]) {
    await run(scenario);
  }
  for (const proc of children) proc.kill();
  process.exit(failures ? 1 : 0);
}

main().catch((error) => {
  notOk(`node-redis ${process.argv[3] || 'scenarios'} ran`, error && error.stack);
  for (const proc of children) proc.kill();
  process.exit(1);
});
