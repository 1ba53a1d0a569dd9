// A peer for interop tests: the browser client (Clients/javascript) run in Node, in one room.
// It prints one JSON line per thing it sees and takes commands on stdin, one per line:
//   send EVENT JSON   room.send(EVENT, the parsed JSON)
//   leave             room.leave()
//   quit              bird.disconnect(), then exit 0
// Usage: node --experimental-websocket js_room_peer.mjs PORT APP_KEY AUTH_URL USER ROOM
import readline from "node:readline";
import { BirdRealtime } from "../../Clients/javascript/src/realtime.js";

const [port, appKey, authURL, user, name] = process.argv.slice(2);
if (!name) {
  process.stderr.write("usage: js_room_peer.mjs PORT APP_KEY AUTH_URL USER ROOM\n");
  process.exit(64);
}
const print = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

const bird = new BirdRealtime({
  appKey, host: "127.0.0.1", port: Number(port),
  roomAuthEndpoint: authURL, authHeaders: { "X-User": user },
});
bird.connection.bind("error", ({ code, message }) => print({ error: { code, message } }));
const room = bird.join(name);
room.onAny((event, data, meta) => print({ event, data, from: meta?.from ?? null, id: meta?.id ?? null, replayed: meta?.replayed ?? false }));
room.ready().then(
  () => print({ ready: true, members: room.members.map((member) => member.id) }),
  (error) => print({ failed: String(error?.code ?? error) }),
);

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const [command, event, ...rest] = line.split(" ");
  if (command === "send") {
    try { room.send(event, JSON.parse(rest.join(" "))); print({ sent: event }); } catch (error) { print({ sendFailed: String(error?.code ?? error) }); }
  }
  else if (command === "leave") { room.leave(); print({ left: name }); }
  else if (command === "quit") { bird.disconnect(); process.exit(0); }
});
