import { test } from "node:test";
import assert from "node:assert/strict";
import { chartRuns } from "../chart.js";

const frame = { width: 300, height: 100, now: 300_000, span: 300_000, max: 10 };

test("points spread across the window by time, 0 at the bottom, the maximum at the top", () => {
  const runs = chartRuns([{ at: 298_000, value: 0 }, { at: 299_000, value: 5 }, { at: 300_000, value: 10 }], frame);
  assert.deepEqual(runs, [[[298, 100], [299, 50], [300, 0]]]);
  assert.deepEqual(chartRuns([{ at: 150_000, value: 2.5 }], { ...frame, now: 300_000 }), [[[150, 75]]]);
});

test("points older than the window are left out, values above the maximum are clipped", () => {
  const runs = chartRuns([{ at: -1, value: 1 }, { at: 0, value: 20 }], frame);
  assert.deepEqual(runs, [[[0, 0]]]);
});

test("a gap of more than 5 s between samples breaks the line", () => {
  const points = [1000, 2000, 3000, 10_000, 11_000].map((at) => ({ at, value: 0 }));
  const runs = chartRuns(points, frame);
  assert.deepEqual(runs.map((run) => run.length), [3, 2]);
  assert.deepEqual(chartRuns([], frame), []);
});
