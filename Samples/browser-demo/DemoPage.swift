/// The demo's page: the browser client loaded from the realtime server it talks to, the
/// connection's state, the room's events with a `replayed` badge, and the two buttons.
/// `window.demo` keeps what the page saw, for the test that drives it (`Tests/peers/browser_demo.py`).
enum DemoPage {
    static func html(realtimePort: Int, appKey: String, room: String) -> String {
        let module = "http://127.0.0.1:\(realtimePort)/client/realtime.js"
        return #"""
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Bird Realtime in the browser: the demo</title>
        <style>
          body { font: 15px/1.45 system-ui, sans-serif; margin: 24px; color: #1d2733; max-width: 760px; }
          h1 { font-size: 20px; margin: 0 0 12px; } h2 { font-size: 16px; margin: 18px 0 6px; }
          .state { display: inline-block; min-width: 92px; text-align: center; padding: 2px 10px; border-radius: 12px; background: #ddd; font-weight: 600; }
          .connected { background: #c8f0d0; } .connecting { background: #fff1b8; } .unavailable { background: #ffd9a8; } .failed { background: #f6c1c1; }
          button { font: inherit; padding: 6px 12px; margin-right: 8px; border-radius: 6px; border: 1px solid #8899aa; background: #f4f7fa; cursor: pointer; }
          #tally { color: #445; } .hint { color: #667; font-size: 13px; } #note { color: #a33; }
          ol { padding-left: 0; list-style: none; columns: 3; font-family: ui-monospace, monospace; font-size: 13px; }
          li { margin: 2px 0; } .badge { margin-left: 6px; padding: 0 6px; border-radius: 8px; font-size: 11px; background: #d9e6ff; color: #1f4fa8; }
          .gap { color: #a33; }
        </style></head>
        <body>
        <h1>Bird Realtime in the browser</h1>
        <p>connection <span id="state" class="state">…</span> <code id="socket"></code></p>
        <p><button id="drop">Drop the connection</button><button id="restart">Restart the server</button> <span id="note"></span></p>
        <p id="tally"></p>
        <p class="hint">Events published while the page is away come back first, in order, marked replayed.</p>
        <h2>room <code>\#(room)</code></h2>
        <ol id="events"></ol>
        <script type="module">
        import { BirdRealtime } from "\#(module)";

        const demo = window.demo = { states: [], events: [], own: [], replayed: 0, duplicates: 0, outOfOrder: 0 };
        const bird = new BirdRealtime({ appKey: "\#(appKey)", host: "127.0.0.1", port: \#(realtimePort),
                                        roomAuthEndpoint: location.origin + "/rooms/auth" });
        const $ = (id) => document.getElementById(id);
        function show() {
          $("state").textContent = bird.connection.state;
          $("state").className = "state " + bird.connection.state;
          $("socket").textContent = bird.connection.connectionId ?? "";
          $("tally").textContent = `${demo.events.length} events, ${demo.replayed} replayed after being away, ` +
            `${demo.duplicates} twice, ${demo.outOfOrder} out of order`;
        }
        bird.connection.bind("state_change", ({ previous, current }) => { demo.states.push({ previous, current, at: Date.now() }); show(); });

        const room = bird.join("\#(room)");
        const seen = new Set();
        let last = 0;
        room.on("tick", (data, meta) => {
          if (seen.has(meta.id)) demo.duplicates += 1;
          if (meta.id < last) demo.outOfOrder += 1;
          seen.add(meta.id); last = Math.max(last, meta.id);
          if (meta.replayed) demo.replayed += 1;
          demo.events.push({ n: data.n, id: meta.id, replayed: meta.replayed });
          const item = document.createElement("li");
          item.textContent = `#${meta.id} tick n=${data.n}`;
          if (meta.replayed) {
            const badge = document.createElement("span");
            badge.className = "badge"; badge.textContent = "replayed"; item.append(badge);
          }
          $("events").prepend(item);
          show();
        });
        room.on("error", (error) => {
          demo.own.push({ event: "error", code: error.code });
          const item = document.createElement("li");
          item.className = "gap"; item.textContent = `${error.code}: ${error.message}`;
          $("events").prepend(item);
        });

        async function post(path, body) {
          $("note").textContent = "";
          const response = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body ?? {}) });
          if (!response.ok) $("note").textContent = (await response.json()).error ?? response.statusText;
        }
        $("drop").onclick = () => post("/drop", { socket_id: bird.connection.connectionId ?? "" });
        $("restart").onclick = () => post("/restart");
        show();
        </script>
        </body></html>
        """#
    }
}
