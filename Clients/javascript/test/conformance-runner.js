// The shared transcripts' runner (Clients/conformance), for Node's test runner
// (conformance.test.js) and for a page in headless Chromium (conformance.html): the same
// scripted server and clock as the Swift and Kotlin clients run, against this client's fakes.
// Auth answers wait until a step gives them; every step ends with the promise callbacks run
// (`settle`: no time passes). No Node module here: `assert` is handed in.

import { ROOM_OWN_EVENTS } from "../src/room-machine.js";
import { makeClient, settle } from "./support.js";

/**
 * Runs one transcript; throws at the first step that does not hold.
 * @param {string} file the transcript's file name (for messages).
 * @param {any} transcript the parsed transcript.
 * @param {{ equal: Function, deepEqual: Function, ok: Function, fail: Function }} assert the assertions.
 * @returns {Promise<void>} done.
 */
export async function runTranscript(file, transcript, assert) {
  /** Auth requests by endpoint, each answered when a step says. @type {Map<string, { body: any, answer: (value: any) => void }[]>} */
  const requests = new Map([["/rooms/auth", []], ["/auth", []], ["/user-auth", []]]);
  const answered = new Map();
  const c = makeClient({}, (url, body) => new Promise((resolve) => { requests.get(url)?.push({ body, answer: resolve }); }));
  const answer = (url, value, where) => {
    const done = answered.get(url) ?? 0;
    assert.ok(done < requests.get(url).length, `${where}: no request to answer`);
    requests.get(url)[done].answer({ status: 200, body: value });
    answered.set(url, done + 1);
  };
  c.setRandom(transcript.draw);
  /** @type {Map<string, { event: string, data: any }[]>} */
  const delivered = new Map();
  /** @type {Map<string, { app: any[], errors: any[] }>} */
  const rooms = new Map();
  /** Member events as `+id` and `-id`. @type {Map<string, string[]>} */
  const memberEvents = new Map();
  for (const [index, step] of transcript.steps.entries()) {
    const where = `${file} step ${index + 1} (${step.step})`;
    switch (step.step) {
      case "connect": c.bird.connect(); break;
      case "disconnect": c.bird.disconnect(); break;
      case "handshake": c.socket.handshake(step.socket_id, step.activity_timeout ?? 120); break;
      case "close": c.socket.drop(step.code, step.reason ?? ""); break;
      case "drop": case "refuse": c.socket.drop(1006, ""); break;
      case "subscribe": {
        const seen = [];
        delivered.set(step.channel, seen);
        const members = [];
        memberEvents.set(step.channel, members);
        c.bird.subscribe(step.channel).bind_global((event, data) => {
          if (event === "bird:member_added") members.push(`+${data.id}`);
          else if (event === "bird:member_removed") members.push(`-${data.id}`);
          else if (!event.startsWith("bird")) seen.push({ event, data });
        });
        break;
      }
      case "confirm": c.socket.receive("bird_internal:subscription_succeeded", step.data ?? {}, step.channel); break;
      case "server_event": c.socket.receive(step.event, step.data, step.channel); break;
      case "expect_channel_auth": assert.deepEqual(requests.get("/auth").map((r) => r.body), step.requests, where); break;
      case "answer_channel_auth": answer("/auth", step.answer, where); break;
      case "signin": c.bird.signin(); break;
      case "expect_signin_auth": assert.deepEqual(requests.get("/user-auth").map((r) => r.body), step.requests, where); break;
      case "answer_signin_auth": answer("/user-auth", step.answer, where); break;
      case "expect_members": {
        const channel = c.bird.channel(step.channel);
        assert.deepEqual(Object.keys(channel.members.members).sort(), [...step.ids].sort(), where);
        assert.equal(channel.members.me?.id, step.me, where);
        break;
      }
      case "expect_member_events": assert.deepEqual(memberEvents.get(step.channel) ?? [], step.events, where); break;
      case "expect_sent_count": assert.equal(c.socket.framesOf(step.event).length, step.count, where); break;
      case "expect_subscribes": assert.deepEqual(c.socket.framesOf("bird:subscribe").map((f) => f.data.channel), step.channels, where); break;
      case "expect_delivered": assert.deepEqual(delivered.get(step.channel) ?? [], step.events, where); break;
      case "advance": c.clock.advance(step.ms); break;
      case "expect_state": assert.equal(c.bird.connection.state, step.state, where); break;
      case "expect_sockets": assert.equal(c.sockets.length, step.count, where); break;
      case "expect_next_timer": {
        const next = c.clock.pending()[0];
        assert.ok(next !== undefined && next >= step.min_ms && next <= step.max_ms, `${where}: next timer in ${next} ms`);
        break;
      }
      case "expect_no_timer": assert.deepEqual(c.clock.pending(), [], where); break;
      case "expect_last_error": assert.equal(c.errors.at(-1)?.code ?? c.errors.at(-1)?.data?.code, step.code, `${where}: ${JSON.stringify(c.errors.at(-1))}`); break;
      case "join": {
        const seen = { app: [], errors: [] };
        rooms.set(step.room, seen);
        c.bird.join(step.room).onAny((event, data, meta) => {
          if (event === "error") seen.errors.push({ code: data.code, reason: data.reason });
          else if (!ROOM_OWN_EVENTS.includes(event)) seen.app.push({ event, data, id: meta.id, epoch: meta.epoch, replayed: meta.replayed });
        });
        break;
      }
      case "expect_room_auth": assert.deepEqual(requests.get("/rooms/auth").map((r) => r.body.rooms), step.requests, where); break;
      case "answer_room_auth": answer("/rooms/auth", step.answer, where); break;
      case "expect_frames": assert.deepEqual(c.socket.framesOf(step.event).map((f) => f.data), step.data, where); break;
      case "room_frame": {
        const payload = { event: step.event, data: step.data };
        if (step.meta) payload.meta = step.meta;
        c.socket.receive("bird:room_event", payload, step.room);
        break;
      }
      case "expect_room": {
        const room = c.bird.room(step.room);
        assert.equal(room?.state, step.state, where);
        if (step.error !== undefined) assert.equal(room?.error?.code, step.error, where);
        break;
      }
      case "expect_room_events": assert.deepEqual(rooms.get(step.room)?.app, step.events, where); break;
      case "expect_room_errors":
        assert.deepEqual(rooms.get(step.room)?.errors.map((error) => Object.fromEntries(Object.entries(error).filter(([, v]) => v !== undefined))), step.errors, where);
        break;
      default: assert.fail(`${where}: unknown step`);
    }
    await settle();
  }
}
