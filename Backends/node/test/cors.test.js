// Cross-origin requests to `authHandler`: the shared cases of Backends/conformance/cors.json,
// over a real loopback `http` server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, request as httpRequest } from "node:http";
import { readFileSync } from "node:fs";
import { authHandler, CrossOrigin, Realtime } from "../src/index.js";

const cases = JSON.parse(readFileSync(new URL("../../conformance/cors.json", import.meta.url), "utf8"));

/** A loopback server for `handler`; its port and a close function. */
async function serve(handler) {
  const server = createServer((request, response) => { handler(request, response); });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: /** @type {import("node:net").AddressInfo} */ (server.address()).port, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** One request; its status, lowercase headers and body text. */
function send(port, { method, path, headers, body }) {
  return new Promise((resolve, reject) => {
    // Header values leave as their UTF-8 bytes (Node would refuse characters past U+00FF).
    const raw = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, Buffer.from(value, "utf8").toString("latin1")]));
    const request = httpRequest({ host: "127.0.0.1", port, method, path, headers: raw }, (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (chunk) => { text += chunk; });
      response.on("end", () => resolve({ status: response.statusCode, headers: response.headers, text }));
    });
    request.on("error", reject);
    request.end(body ?? "");
  });
}

function check(item, answer) {
  assert.equal(answer.status, item.status, item.name);
  for (const [name, value] of Object.entries(item.headers)) assert.equal(answer.headers[name.toLowerCase()], value, `${item.name}: ${name}`);
  for (const name of item.absent) assert.equal(answer.headers[name.toLowerCase()], undefined, `${item.name}: ${name} absent`);
  if (answer.status === 204) assert.equal(answer.text, "", `${item.name}: no body`);
}

const backend = () => {
  const realtime = new Realtime({ appKey: "app-key", appSecret: "app-secret" });
  realtime.room("news:{topic}", { public: true });
  return realtime;
};

test("every shared CORS case, and none of the headers without allowed origins", async () => {
  const open = await serve(authHandler(backend(), { user: () => "ann", allowedOrigins: cases.allowed_origins }));
  const closed = await serve(authHandler(backend(), { user: () => "ann" }));
  try {
    for (const item of cases.cases) check(item, await send(open.port, item.request));
    for (const item of cases.without_origins.cases) check(item, await send(closed.port, item.request));
    const refused = await send(closed.port, cases.without_origins.cases[0].request);
    assert.deepEqual(JSON.parse(refused.text), { error: "the origin https://shop.example is not allowed: add it to allowedOrigins" });
  } finally {
    await open.close();
    await closed.close();
  }
});

test("origins as a browser sends them are accepted; one not UTF-8 is refused, echoed printable", async () => {
  for (const origin of cases.valid_origins.origins) assert.ok(new CrossOrigin([origin]).allows(origin), origin);
  const answer = new CrossOrigin(["https://shop.example"]).preflight("POST", `https://e\u00ffvil.example${"a".repeat(300)}`, "POST", undefined);
  assert.equal(answer.status, 403);
  assert.ok(answer.error.error.startsWith("the origin https://e?vil.example") && answer.error.error.length < 300);
});

test("invalid allowed origins are refused when the handler is built", () => {
  for (const origin of cases.invalid_origins) {
    assert.throws(() => authHandler(backend(), { user: () => null, allowedOrigins: [origin] }), /allowedOrigins/, origin);
    assert.throws(() => new CrossOrigin([origin]), TypeError, origin);
  }
});
