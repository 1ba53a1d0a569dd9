// The library's own rules beyond the conformance fixtures: the seed's line as written, rule
// refusals, authorizers (sync, async, throwing), the http handlers' answers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { authHandler, canonicalJSON, Realtime, RuleError, webhookHandler } from "../src/index.js";
import { createHmac } from "node:crypto";

const clock = () => 1_764_579_200_123;
const make = (options = {}) => new Realtime({ appKey: "app-key", appSecret: "app-secret", clock, ...options });
const claims = (token) => JSON.parse(Buffer.from(token.split(".")[1], "base64url").toString());

test("the rooms seed's Node line runs as written", async () => {
  const orders = { 1042: { userId: "ann" } };
  const findOrder = async (id) => orders[id];
  const realtime = make();
  realtime.room( 'order:{id}', { history: 20 }, async ( user, { id } ) => ( await findOrder( id ) )?.userId === user );
  const answer = await realtime.authorizeRooms(["order:1042", "order:7"], "ann");
  assert.deepEqual(answer.rooms["order:7"], { error: "forbidden" });
  assert.equal(claims(answer.rooms["order:1042"].token).rule.history, 20);
  assert.equal(claims(answer.rooms["order:1042"].token).sub, "ann");
  assert.deepEqual((await realtime.authorizeRooms(["order:1042"], "bob")).rooms["order:1042"], { error: "forbidden" });
});

test("rules are refused when declared: unknown keys, wrong types, out of range, sealed without a master key", () => {
  const refused = (options, code = "invalid_rule") => assert.throws(() => make().room("order:{id}", options), (e) => e instanceof RuleError && e.code === code, JSON.stringify(options));
  refused({ histroy: 20 });
  refused({ history: "20" });
  refused({ history: 2.5 });
  refused({ presence: 1 });
  refused({ max: 0 });
  refused({ span: 1801 });
  refused({ sealed: true }, "master_key_required");
  refused(null);
  assert.throws(() => make().room("order:{id}", {}, "not a function"), (e) => e.code === "invalid_rule");
  assert.throws(() => make().room("order:{id}{x}"), (e) => e.code === "invalid_pattern");
  assert.throws(() => new Realtime({ appKey: "k", appSecret: "s", encryptionMasterKey: "c2hvcnQ=" }), TypeError);
  const realtime = make();
  realtime.room("shop", (user) => user === "ann"); // the authorizer in the options' place
  assert.equal(realtime.rules[0].rule.history, 0);
});

test("authorizers: only true admits; one that throws answers forbidden and is reported; the first matching rule wins", async () => {
  const reported = [];
  const realtime = make({ onAuthorizerError: (error, room) => reported.push([String(error.message), room]) });
  realtime.room("a:{id}", () => "yes");
  realtime.room("b:{id}", () => { throw new Error("database down"); });
  realtime.room("c:{id}", async ({ length }) => length === 3);
  realtime.room("{any}", {}, () => true);
  const answer = await realtime.authorizeRooms(["a:1", "b:1", "c:1", "d:1", "zzz"], "ann");
  assert.deepEqual(answer.rooms["a:1"], { error: "forbidden" }, "a truthy non-boolean does not admit");
  assert.deepEqual(answer.rooms["b:1"], { error: "forbidden" });
  assert.deepEqual(reported, [["database down", "b:1"]]);
  assert.ok(answer.rooms["c:1"].token);
  assert.deepEqual(answer.rooms["d:1"], { error: "no_rule" }, "d:1 has a colon: {any} takes one segment");
  assert.ok(answer.rooms.zzz.token);
  assert.deepEqual((await realtime.authorizeRooms(["a:1"], null)).rooms["a:1"], { error: "forbidden" }, "a visitor on a non-public rule");
});

test("a public rule takes no authorizer and shares no name with another rule: its grant is checked against the pattern alone", async () => {
  assert.throws(() => make().room("news:{topic}", { public: true }, ({ length }) => length > 0),
    (e) => e instanceof RuleError && e.code === "public_authorizer");
  const realtime = make();
  realtime.room("news:{topic}-staff", (user) => user === "staff");
  assert.throws(() => realtime.room("news:{topic}", { public: true }),
    (e) => e instanceof RuleError && e.code === "public_overlap" && e.message.includes("news:{topic}-staff"));
  assert.equal(realtime.rules.length, 1, "the refused rule is not added");
  assert.deepEqual((await realtime.authorizeRooms(["news:x-staff"], null)).rooms["news:x-staff"], { error: "forbidden" });
  assert.deepEqual(realtime.config().grants, [], "no grant admits a visitor to news:x-staff");
  // The reverse order is refused too; rules that are not public may overlap (first match wins).
  const reversed = make();
  reversed.room("news:{topic}", { public: true });
  assert.throws(() => reversed.room("news:{topic}-staff", (user) => user === "staff"), (e) => e.code === "public_overlap");
  reversed.room("order:{id}");
  reversed.room("order:{id}-gift", { history: 5 });
  assert.deepEqual(reversed.rules.map(({ pattern }) => pattern), ["news:{topic}", "order:{id}", "order:{id}-gift"]);
});

/** An http server with the handlers; the user from X-User; `fails` makes the session lookup throw. */
async function serve(realtime, onWebhook = () => {}) {
  const rooms = authHandler(realtime, { user: (request) => {
    if (request.headers["x-fail"]) throw new Error("no session");
    return request.headers["x-user"] || null;
  }, path: "/api" });
  const hooks = webhookHandler(realtime, onWebhook);
  const server = createServer((request, response) => (request.url === "/hook" ? hooks(request, response) : rooms(request, response)));
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${server.address().port}`;
  return { base, close: () => new Promise((resolve) => server.close(resolve)) };
}

test("the auth route over http: 200 per room, 400, 401, 404, 405, 413; config", async () => {
  const realtime = make();
  realtime.room("order:{id}", { history: 5 });
  realtime.room("news:{topic}", { public: true });
  const { base, close } = await serve(realtime);
  try {
    const post = (body, headers = {}) => fetch(`${base}/api/rooms/auth`, { method: "POST", body, headers: { "Content-Type": "application/json", ...headers } });
    const ok = await post(JSON.stringify({ rooms: ["order:1", "nothing"] }), { "X-User": "ann" });
    assert.equal(ok.status, 200);
    const text = await ok.text();
    assert.equal(text, canonicalJSON(JSON.parse(text)), "written canonically");
    assert.deepEqual(JSON.parse(text).rooms.nothing, { error: "no_rule" });
    assert.equal((await post("not json")).status, 400);
    assert.equal((await post(JSON.stringify({ rooms: [1] }))).status, 400);
    assert.equal((await post(JSON.stringify({ rooms: Array.from({ length: 101 }, (_, i) => `order:${i}`) }))).status, 400);
    assert.equal((await post(JSON.stringify({ rooms: ["order:1"] }), { "X-Fail": "1" })).status, 401);
    assert.equal((await post("x".repeat(70 * 1024))).status, 413);
    assert.equal((await fetch(`${base}/api/rooms/auth`)).status, 405);
    assert.equal((await fetch(`${base}/elsewhere`)).status, 404);
    const config = await (await fetch(`${base}/api/config`)).json();
    assert.deepEqual(config.grants.map((grant) => grant.pattern), ["news:{topic}"]);
    assert.equal(claims(config.grants[0].token).sub, undefined);
  } finally {
    await close();
  }
});

test("the webhook handler: verified ones handed on, refused ones 401 and not handed on", async () => {
  const got = [];
  const realtime = make();
  const { base, close } = await serve(realtime, (webhook) => got.push(webhook));
  try {
    const body = JSON.stringify({ time_ms: 5, events: [{ name: "channel_vacated", channel: "x" }] });
    const signature = createHmac("sha256", "app-secret").update(body).digest("hex");
    const post = (text, key, sig) => fetch(`${base}/hook`, { method: "POST", body: text, headers: { "X-Pusher-Key": key, "X-Pusher-Signature": sig } });
    assert.equal((await post(body, "app-key", signature)).status, 200);
    assert.equal((await post(body, "app-key", signature.toUpperCase())).status, 200, "hex in either case");
    assert.equal((await post(`${body} `, "app-key", signature)).status, 401);
    assert.equal((await post(body, "nope", signature)).status, 401);
    assert.equal(got.length, 2);
    assert.deepEqual(got[0].events, [{ name: "channel_vacated", channel: "x" }]);
  } finally {
    await close();
  }
});

test("the HTTP API: every query parameter signed (limit and before too), room names percent-encoded in the path", async () => {
  const seen = [];
  const server = createServer((request, response) => {
    const url = new URL(request.url, "http://x");
    const parameters = [...url.searchParams].filter(([name]) => name !== "auth_signature").sort(([a], [b]) => (a < b ? -1 : 1));
    // As the realtime server checks it (HTTPAPI.authenticate): every parameter but the signature, sorted.
    const toSign = `${request.method}\n${url.pathname}\n${parameters.map(([name, value]) => `${name}=${value}`).join("&")}`;
    const valid = createHmac("sha256", "app-secret").update(toSign).digest("hex") === url.searchParams.get("auth_signature");
    seen.push({ path: url.pathname, limit: url.searchParams.get("limit"), valid });
    response.writeHead(valid ? 200 : 401, { "Content-Type": "application/json" });
    response.end(valid ? '{"events":[],"more":false}' : '{"error":"invalid auth_signature"}');
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const realtime = new Realtime({ appId: "42", appKey: "app-key", appSecret: "app-secret", server: `http://127.0.0.1:${server.address().port}` });
    assert.deepEqual(await realtime.roomHistory("a;b:1", { limit: 5, before: 9 }), { events: [], more: false });
    await realtime.roomUsers("chat:7");
    assert.deepEqual(seen, [{ path: "/apps/42/rooms/a%3Bb%3A1/history", limit: "5", valid: true }, { path: "/apps/42/rooms/chat%3A7/users", limit: null, valid: true }]);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

test("strict JSON where Swift is strict: a signin's user data with a name twice, webhooks with a name twice, too deep, or fields of the wrong type", () => {
  const realtime = make();
  assert.throws(() => realtime.authenticateUser("1.2", '{"id":"ann","id":"bob"}'), (e) => e.code === "invalid_user_data" && /twice/.test(e.message));
  assert.throws(() => realtime.authenticateUser("1.2", '{"id":"ann","info":{"a":1,"\\u0061":2}}'), (e) => e.code === "invalid_user_data");
  const sign = (body) => createHmac("sha256", "app-secret").update(body).digest("hex");
  const refused = (body) => assert.throws(() => realtime.verifyWebhook("app-key", sign(body), body), (e) => e.code === "malformed", body.slice(0, 80));
  refused('{"time_ms":1,"time_ms":2,"events":[]}');
  refused('{"time_ms":1,"events":[{"name":"room_event","data":{"n":1}}]}');
  refused('{"time_ms":1,"events":[{"name":"room_event","id":"7"}]}');
  refused('{"time_ms":1,"events":[{"name":"room_event","id":-1}]}');
  refused(`{"time_ms":1,"events":[{"name":"x","data":"${"[".repeat(10)}"}],"deep":${"[".repeat(65)}${"]".repeat(65)}}`);
  const ok = '{"time_ms":1,"events":[{"name":"room_event","data":"{\\"n\\":1}","id":7,"at":5,"user_id":null}]}';
  assert.equal(realtime.verifyWebhook("app-key", sign(ok), ok).events[0].id, 7);
});

test("canonical JSON numbers are doubles: a bigint as its double when one holds it exactly, else refused, never rounded", () => {
  const written = [[2n ** 53n, "9007199254740992"], [-(2n ** 53n), "-9007199254740992"], [2n ** 53n + 2n, "9.007199254740994e+15"],
    [9_500_000_000_000_000n, "9.5e+15"], [10n ** 16n, "1e+16"], [-(10n ** 16n), "-1e+16"], [2n ** 60n, "1.152921504606847e+18"],
    [0n, "0"], [-1n, "-1"], [999_999_999_999_999n, "999999999999999"]];
  for (const [value, text] of written) assert.equal(canonicalJSON(value), text, String(value));
  // the float path agrees with Swift's Double.description: plain up to 2^53, an exponent above
  assert.equal(canonicalJSON([2 ** 53, 2 ** 53 + 2, 9.5e15, 1e16, 1e15]), "[9007199254740992,9.007199254740994e+15,9.5e+15,1e+16,1000000000000000]");
  for (const value of [2n ** 53n + 1n, -(2n ** 53n) - 1n, 123456789012345678n, 2n ** 63n - 1n, 10n ** 400n, { a: [2n ** 53n + 1n] }]) {
    assert.throws(() => canonicalJSON(value), (e) => e instanceof TypeError && /no double holds/.test(e.message), String(value));
  }
  assert.throws(() => canonicalJSON(123456789012345678n), { name: "TypeError", message: /the integer 123456789012345678 exactly, so not every library could write it the same/ });
});

test("room event data: integers as their double, one no double holds refused before anything is sent; in info, that room answers bad_request", async () => {
  const realtime = make({ server: "http://127.0.0.1:9", appId: "42" });
  realtime.room("order:{id}");
  realtime.room("chat:{id}", { presence: true });
  assert.equal(JSON.parse(realtime.roomEventBody("order:1", "e", { big: 10n ** 16n, n: 2 ** 53 })).data, '{"big":1e+16,"n":9007199254740992}');
  const refused = (e) => e instanceof TypeError && /no double holds the integer 123456789012345678 exactly/.test(e.message);
  assert.throws(() => realtime.roomEventBody("order:1", "e", { id: 123456789012345678n }), refused);
  assert.throws(() => realtime.publishRoom("order:1", "e", { id: 123456789012345678n }), refused); // no server listens: never asked
  assert.throws(() => realtime.publishRooms([{ room: "order:1", event: "e", data: 1 }, { room: "order:2", event: "e", data: 123456789012345678n }]), refused);
  assert.throws(() => realtime.trigger("a", "e", 123456789012345678n), refused);
  const answer = await realtime.authorizeRooms(["chat:1", "order:1"], "ann", { id: 123456789012345678n });
  assert.deepEqual(answer.rooms["chat:1"], { error: "bad_request" });
  assert.ok(answer.rooms["order:1"].token, "info is only in presence rooms' tokens");
  assert.deepEqual(claims((await realtime.authorizeRooms(["chat:1"], "ann", { id: 10n ** 16n })).rooms["chat:1"].token).info, { id: 1e16 });
});
