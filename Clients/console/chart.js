// A line chart of one series on a canvas: time across (the window before the newest sample, so
// the server's clock, not the browser's, places points), 0 to a rounded maximum up, the
// maximum as the axis label. The line breaks where samples are missing (the tab was hidden).

import { formatRate, niceCeiling } from "./model.js";

/**
 * Where the points fall on a `width` × `height` area (y down, as a canvas draws).
 * @param {{ at: number, value: number }[]} points the series, oldest first.
 * @param {{ width: number, height: number, now: number, span: number, max: number, gap?: number }} frame the area, the newest instant, the milliseconds shown, the value at the top, and the milliseconds between two samples that break the line (5 s).
 * @returns {[number, number][][]} the line's runs of `[x, y]`.
 */
export function chartRuns(points, { width, height, now, span, max, gap = 5000 }) {
  /** @type {[number, number][][]} */
  const runs = [];
  let previous = -Infinity;
  for (const { at, value } of points) {
    if (at < now - span) continue;
    if (at - previous > gap) runs.push([]);
    previous = at;
    const y = height - (Math.min(value, max) / max) * height;
    runs[runs.length - 1].push([((at - now + span) / span) * width, y]);
  }
  return runs;
}

/**
 * Draws a series: the line in the canvas' CSS `color`, the axis maximum top left, per second.
 * @param {HTMLCanvasElement} canvas the canvas, sized by CSS.
 * @param {{ at: number, value: number }[]} points the series, oldest first.
 * @param {number} now the newest instant, in milliseconds.
 * @param {number} span the milliseconds shown.
 */
export function drawChart(canvas, points, now, span) {
  const ratio = globalThis.devicePixelRatio || 1;
  const width = Math.max(1, Math.round(canvas.clientWidth * ratio));
  const height = Math.max(1, Math.round(canvas.clientHeight * ratio));
  if (canvas.width !== width || canvas.height !== height) Object.assign(canvas, { width, height });
  const context = canvas.getContext("2d");
  if (!context) return;
  const max = niceCeiling(points.reduce((top, point) => Math.max(top, point.value), 0));
  const top = 14 * ratio;
  const color = getComputedStyle(canvas).color;
  context.clearRect(0, 0, width, height);
  context.globalAlpha = 0.35;
  context.fillStyle = color;
  context.fillRect(0, top, width, ratio);
  context.fillRect(0, height - ratio, width, ratio);
  context.globalAlpha = 1;
  context.font = `${11 * ratio}px system-ui, sans-serif`;
  context.textBaseline = "top";
  context.fillText(`${formatRate(max)}/s`, 2 * ratio, 0);
  context.strokeStyle = color;
  context.lineWidth = 1.5 * ratio;
  context.lineJoin = "round";
  for (const run of chartRuns(points, { width, height: height - top - ratio, now, span, max })) {
    context.beginPath();
    run.forEach(([x, y], index) => (index ? context.lineTo(x, y + top) : context.moveTo(x, y + top)));
    if (run.length === 1) context.lineTo(run[0][0] + ratio, run[0][1] + top);
    context.stroke();
  }
}
