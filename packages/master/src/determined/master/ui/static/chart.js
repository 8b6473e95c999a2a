// A small canvas chart: many line series (or scatter points) drawn fast.
//
// Lines are decimated per pixel column: consecutive points that land in the same column become
// one vertical stroke from their min to their max, so a series costs at most ~4 path vertices
// per column whatever its length, and spikes stay visible.

export const PALETTE = [
  "#2f6fde", "#e4572e", "#29a35a", "#9b5de5", "#f2a71b", "#17becf", "#d6336c", "#6c757d",
  "#8c564b", "#1f3a93", "#b5bd00", "#ff7f0e", "#00897b", "#c2185b", "#5e35b1", "#7cb342",
];

export function colorFor(index) {
  if (index < PALETTE.length) return PALETTE[index];
  const hue = (index * 137.508) % 360;
  return `hsl(${hue.toFixed(0)}, 62%, 45%)`;
}

const MARGIN = { left: 62, right: 14, top: 10, bottom: 34 };

function niceStep(span, count) {
  const raw = span / Math.max(1, count);
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const unit = raw / power;
  const nice = unit >= 5 ? 10 : unit >= 2 ? 5 : unit >= 1 ? 2 : 1;
  return nice * power;
}

function linearTicks(lo, hi, count) {
  if (!(hi > lo)) return [lo];
  const step = niceStep(hi - lo, count);
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  }
  return ticks;
}

function logTicks(lo, hi) {
  // decades when the range spans several; 1-2-5 steps inside one or two decades
  const first = Math.floor(Math.log10(lo)), last = Math.ceil(Math.log10(hi));
  for (const mantissas of [[1], [1, 2, 5], [1, 1.5, 2, 3, 5, 7]]) {
    const ticks = [];
    for (let p = first; p <= last; p++) {
      for (const m of mantissas) {
        const v = m * Math.pow(10, p);
        if (v >= lo * 0.999 && v <= hi * 1.001) ticks.push(v);
      }
    }
    if (ticks.length >= 3) return ticks;
  }
  return linearTicks(lo, hi, 4).filter((v) => v > 0);
}

export function formatTick(v) {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(1).replace("e+", "e");
  return Number(v.toPrecision(4)).toString();
}

/** Every chart drawn on the page, for tests and the console: `window.detCharts`. */
window.detCharts = window.detCharts || [];

export class Chart {
  /**
   * @param {HTMLElement} container where the canvas, legend and tooltip go
   * @param {{height?: number, logY?: boolean, scatter?: boolean, xLabel?: string,
   *          yLabel?: string, categories?: string[]|null, name?: string}} options
   */
  constructor(container, options = {}) {
    this.container = container;
    this.options = { height: 320, logY: false, scatter: false, xLabel: "batches", yLabel: "", categories: null, ...options };
    this.series = [];
    this.hidden = new Set();
    this.drawn = [];
    this.drawMs = 0;
    container.replaceChildren();
    this.canvas = document.createElement("canvas");
    this.canvas.dataset.chart = options.name || "";
    this.legend = document.createElement("div");
    this.legend.className = "legend";
    this.tip = document.createElement("div");
    this.tip.className = "tip";
    this.empty = document.createElement("div");
    this.empty.className = "nodata";
    container.append(this.canvas, this.tip, this.empty, this.legend);
    this.canvas.addEventListener("mousemove", (e) => this.hover(e));
    this.canvas.addEventListener("mouseleave", () => (this.tip.style.display = "none"));
    this.resizeObserver = new ResizeObserver(() => {
      if (this.container.clientWidth !== this.lastWidth) this.draw();
    });
    this.resizeObserver.observe(container);
    window.detCharts.push(this);
  }

  /** Pixel width available for the plot: what the server should decimate to. */
  plotWidth() {
    return Math.max(50, Math.floor((this.container.clientWidth || 800) - MARGIN.left - MARGIN.right));
  }

  /** @param {{key: any, label: string, color?: string, x: number[], y: number[]}[]} series */
  setSeries(series) {
    this.series = series.map((s, i) => ({ color: colorFor(i), ...s }));
    this.renderLegend();
    this.draw();
  }

  setLogY(on) {
    this.options.logY = !!on;
    this.draw();
  }

  setOptions(options) {
    Object.assign(this.options, options);
  }

  renderLegend() {
    if (this.options.scatter || this.series.length <= 1) {
      this.legend.replaceChildren();
      return;
    }
    this.legend.replaceChildren(
      ...this.series.map((s) => {
        const item = document.createElement("span");
        item.dataset.key = s.key;
        item.className = this.hidden.has(s.key) ? "off" : "";
        const swatch = document.createElement("i");
        swatch.style.background = s.color;
        item.append(swatch, s.label);
        item.addEventListener("click", () => {
          if (this.hidden.has(s.key)) this.hidden.delete(s.key);
          else this.hidden.add(s.key);
          item.className = this.hidden.has(s.key) ? "off" : "";
          this.draw();
        });
        return item;
      }),
    );
  }

  visible() {
    return this.series.filter((s) => !this.hidden.has(s.key));
  }

  bounds() {
    const log = this.options.logY;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const s of this.visible()) {
      const { x, y } = s;
      for (let i = 0; i < x.length; i++) {
        const yv = y[i];
        if (!Number.isFinite(yv) || (log && yv <= 0)) continue;
        const xv = x[i];
        if (xv < x0) x0 = xv;
        if (xv > x1) x1 = xv;
        if (yv < y0) y0 = yv;
        if (yv > y1) y1 = yv;
      }
    }
    if (!Number.isFinite(x0)) return null;
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    if (y0 === y1) {
      const pad = Math.abs(y0) * 0.1 || 1;
      y0 = log ? y0 / 2 : y0 - pad;
      y1 = log ? y1 * 2 : y1 + pad;
    } else if (!log) {
      const pad = (y1 - y0) * (this.options.scatter ? 0.08 : 0.04);
      y0 -= pad;
      y1 += pad;
    }
    if (this.options.categories) {
      x0 = -0.5;
      x1 = this.options.categories.length - 0.5;
    } else if (this.options.scatter) {
      const pad = (x1 - x0) * 0.05;
      x0 -= pad;
      x1 += pad;
    }
    return { x0, x1, y0, y1 };
  }

  draw() {
    const started = performance.now();
    const width = this.container.clientWidth || 800;
    this.lastWidth = width;
    const height = this.options.height;
    const dpr = window.devicePixelRatio || 1;
    const canvas = this.canvas;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.style.height = height + "px";
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    this.drawn = [];
    const box = this.bounds();
    this.box = box;
    this.empty.textContent = box ? "" : "No data to show.";
    canvas.dataset.series = "0";
    canvas.dataset.points = "0";
    if (!box) {
      this.drawMs = performance.now() - started;
      canvas.dataset.drawn = "true";
      return;
    }
    const left = MARGIN.left, top = MARGIN.top;
    const plotW = width - MARGIN.left - MARGIN.right;
    const plotH = height - MARGIN.top - MARGIN.bottom;
    const log = this.options.logY;
    const ly0 = log ? Math.log10(box.y0) : box.y0;
    const ly1 = log ? Math.log10(box.y1) : box.y1;
    const kx = plotW / (box.x1 - box.x0);
    const ky = plotH / (ly1 - ly0);
    const sx = (v) => left + (v - box.x0) * kx;
    const sy = log ? (v) => top + (ly1 - Math.log10(v)) * ky : (v) => top + (ly1 - v) * ky;
    this.scale = { sx, sy, left, top, plotW, plotH };

    this.drawAxes(ctx, box, sx, sy, left, top, plotW, plotH);

    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, plotW, plotH);
    ctx.clip();
    ctx.lineWidth = 1.6;
    ctx.lineJoin = "round";
    let total = 0;
    for (const s of this.visible()) {
      const n = this.options.scatter ? this.drawPoints(ctx, s, sx, sy, log) : this.drawLine(ctx, s, sx, sy, log);
      total += s.x.length;
      this.drawn.push({ key: s.key, label: s.label, color: s.color, points: s.x.length, marks: n });
    }
    ctx.restore();
    canvas.dataset.series = String(this.drawn.filter((d) => d.marks > 0).length);
    canvas.dataset.points = String(total);
    canvas.dataset.drawn = "true";
    this.drawnAt = performance.now();
    this.drawMs = this.drawnAt - started;
  }

  drawLine(ctx, s, sx, sy, log) {
    const { x, y } = s;
    ctx.strokeStyle = s.color;
    ctx.beginPath();
    let column = null, first = 0, low = 0, high = 0, last = 0, columns = 0, started = false;
    const flush = () => {
      if (column === null) return;
      if (!started) { ctx.moveTo(column, first); started = true; } else ctx.lineTo(column, first);
      if (low !== high) { ctx.lineTo(column, low); ctx.lineTo(column, high); }
      ctx.lineTo(column, last);
      columns++;
    };
    for (let i = 0; i < x.length; i++) {
      const yv = y[i];
      if (!Number.isFinite(yv) || (log && yv <= 0)) continue;
      const px = Math.round(sx(x[i]));
      const py = sy(yv);
      if (px !== column) {
        flush();
        column = px; first = low = high = last = py;
      } else {
        if (py < low) low = py;
        if (py > high) high = py;
        last = py;
      }
    }
    flush();
    if (columns === 1) {  // a single column: draw a dot so a one-report series shows
      ctx.fillStyle = s.color;
      ctx.fillRect(column - 2, first - 2, 4, 4);
    }
    ctx.stroke();
    return columns;
  }

  drawPoints(ctx, s, sx, sy, log) {
    const { x, y } = s;
    ctx.fillStyle = s.color;
    const seen = new Set();
    let marks = 0;
    for (let i = 0; i < x.length; i++) {
      const yv = y[i];
      if (!Number.isFinite(yv) || (log && yv <= 0)) continue;
      const px = Math.round(sx(x[i])), py = Math.round(sy(yv));
      const key = px * 100000 + py;
      if (seen.has(key)) continue;
      seen.add(key);
      ctx.beginPath();
      ctx.arc(px, py, 4, 0, Math.PI * 2);
      ctx.fill();
      marks++;
    }
    return marks;
  }

  drawAxes(ctx, box, sx, sy, left, top, plotW, plotH) {
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = "#6b7384";
    ctx.strokeStyle = "#e6e9ef";
    ctx.lineWidth = 1;
    const yTicks = this.options.logY ? logTicks(box.y0, box.y1) : linearTicks(box.y0, box.y1, 5);
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (const t of yTicks) {
      const py = Math.round(sy(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(left, py); ctx.lineTo(left + plotW, py); ctx.stroke();
      ctx.fillText(formatTick(t), left - 6, py);
    }
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const cats = this.options.categories;
    const xTicks = cats ? cats.map((_, i) => i) : linearTicks(box.x0, box.x1, Math.max(2, Math.floor(plotW / 90)));
    for (const t of xTicks) {
      const px = Math.round(sx(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(px, top); ctx.lineTo(px, top + plotH); ctx.stroke();
      ctx.fillText(cats ? String(cats[t]).slice(0, 14) : formatTick(t), px, top + plotH + 5);
    }
    ctx.strokeStyle = "#b9c0cc";
    ctx.strokeRect(left + 0.5, top + 0.5, plotW, plotH);
    if (this.options.xLabel) {
      ctx.textAlign = "right";
      ctx.fillText(this.options.xLabel, left + plotW, top + plotH + 19);
    }
    if (this.options.yLabel) {
      ctx.save();
      ctx.translate(12, top + plotH / 2);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = "center";
      ctx.fillText(this.options.yLabel, 0, 0);
      ctx.restore();
    }
  }

  hover(event) {
    if (!this.box || !this.scale) return;
    const rect = this.canvas.getBoundingClientRect();
    const mx = event.clientX - rect.left, my = event.clientY - rect.top;
    const { sx, sy } = this.scale;
    let best = null, bestD = 14 * 14;
    for (const s of this.visible()) {
      const { x, y } = s;
      if (!x.length) continue;
      let lo = 0, hi = x.length - 1;
      if (!this.options.scatter) {
        // binary search the nearest x, then look at a few neighbours
        const target = this.box.x0 + (mx - this.scale.left) / (this.scale.plotW / (this.box.x1 - this.box.x0));
        while (lo < hi) { const mid = (lo + hi) >> 1; if (x[mid] < target) lo = mid + 1; else hi = mid; }
        lo = Math.max(0, lo - 3); hi = Math.min(x.length - 1, lo + 6);
      }
      for (let i = lo; i <= hi; i++) {
        if (!Number.isFinite(y[i]) || (this.options.logY && y[i] <= 0)) continue;
        const dx = sx(x[i]) - mx, dy = sy(y[i]) - my;
        const d = dx * dx + dy * dy;
        if (d < bestD) { bestD = d; best = { s, i }; }
      }
    }
    if (!best) { this.tip.style.display = "none"; return; }
    const { s, i } = best;
    const xText = this.options.categories ? this.options.categories[s.x[i]] : formatTick(s.x[i]);
    this.tip.textContent = `${s.label}: ${Number(s.y[i].toPrecision(6))} @ ${this.options.xLabel || "x"} ${xText}`;
    this.tip.style.display = "block";
    this.tip.style.left = Math.min(mx + 12, this.canvas.clientWidth - 200) + "px";
    this.tip.style.top = my + 12 + "px";
  }
}
