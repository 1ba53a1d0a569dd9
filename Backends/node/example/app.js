// A sample app server on Node's `http`, for the end-to-end run (Backends/conformance/e2e.py):
// the rooms' auth route and config, a publish route, and a webhook receiver, all through
// the library. Environment: APP_ID, APP_KEY, APP_SECRET, REALTIME_API (the realtime server's
// http base), PORT, and ALLOWED_ORIGINS (optional: pages' origins, separated by spaces or commas,
// that may call the auth and config routes across origins). The user comes from the X-User
// header (empty: a visitor), standing in for the app's session.
import { createServer } from "node:http";
import { authHandler, canonicalJSON, readBody, Realtime, webhookHandler } from "../src/index.js";

const env = (name) => {
  const value = process.env[name];
  if (!value) { console.error(`app.js: ${name} is needed`); process.exit(2); }
  return value;
};
const realtime = new Realtime({ appId: env("APP_ID"), appKey: env("APP_KEY"), appSecret: env("APP_SECRET"), server: env("REALTIME_API") });

// The app's orders: every one is ann's but order 13.
const findOrder = async (id) => ({ userId: id === "13" ? "someone else" : "ann" });
// The rooms seed's line (with webhook added, so the run sees room events posted back).
realtime.room('order:{id}', { history: 20, webhook: true }, async ( user, { id } ) => ( await findOrder( id ) )?.userId === user );
realtime.room("chat:{a}:{b}", { history: 50, presence: true, members_send: true });
realtime.room("news:{topic}", { public: true });

const webhooks = [];
const allowedOrigins = (process.env.ALLOWED_ORIGINS ?? "").split(/[ \t\r\n,]+/).filter((origin) => origin !== "");
const rooms = authHandler(realtime, { user: (request) => request.headers["x-user"] || null, info: (request, user) => ({ name: user }), allowedOrigins });
const hooks = webhookHandler(realtime, (webhook) => { webhooks.push(webhook); });

const reply = (response, status, value) => {
  const text = canonicalJSON(value);
  response.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  response.end(text);
};

const server = createServer(async (request, response) => {
  try {
    if (request.url === "/webhook" && request.method === "POST") return await hooks(request, response);
    if (request.url === "/webhooks" && request.method === "GET") return reply(response, 200, webhooks);
    if (request.url === "/publish" && request.method === "POST") {
      const body = await readBody(request);
      let event;
      try { event = JSON.parse(body?.toString("utf8") ?? ""); } catch { return reply(response, 400, { error: "expected {room, event, data}" }); }
      try {
        return reply(response, 200, await realtime.publishRoom(event.room, event.event, event.data));
      } catch (error) {
        return reply(response, 502, { error: String(error.message ?? error) });
      }
    }
    return await rooms(request, response);
  } catch (error) {
    if (!response.headersSent) reply(response, 500, { error: String(error) });
  }
});
server.listen(Number(env("PORT")), "127.0.0.1", () => console.log(`port ${server.address().port}`));
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
