// PyPTO's profile page: renders the JSON in #profile-data (tools/profiler/html.py).
// Self-contained: no library, no network. Times are microseconds of modelled NPU time.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("profile-data").textContent);
  const body = document.body;
  const LABEL_W = 150, ROW_H = 16, AXIS_H = 22;
  const PIPE_COLORS = {MTE2: "#4e79a7", MTE1: "#76b7b2", M: "#e15759", V: "#59a14f",
                       MTE3: "#f28e2b", FIX: "#b07aa1", S: "#9c755f"};

  // -- formatting --------------------------------------------------------------------------
  function fmtUs(us) {
    if (us === null || us === undefined) return "-";
    const a = Math.abs(us);
    if (a >= 1e3) return (us / 1e3).toFixed(3) + " ms";
    if (a >= 1) return us.toFixed(3) + " us";
    return (us * 1e3).toFixed(1) + " ns";
  }
  function fmtNum(v, unit) {
    if (!v) return "-";
    const p = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (const [s, n] of p) if (Math.abs(v) >= s) return (v / s).toFixed(2) + " " + n + unit;
    return v.toFixed(2) + " " + unit;
  }
  function pct(v) { return v === null || v === undefined ? "-" : (100 * v).toFixed(1) + " %"; }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
                                               '"': "&quot;"}[c]));
  }
  function hashColor(text, sat, light) {
    let h = 0;
    for (let i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) >>> 0;
    return "hsl(" + (h % 360) + "," + sat + "%," + light + "%)";
  }
  function table(headers, rows) {
    return "<table><tr>" + headers.map(h => "<th>" + h + "</th>").join("") + "</tr>" +
      rows.map(r => "<tr>" + r.map(c => c.startsWith && c.startsWith("<td") ? c :
                                  "<td>" + c + "</td>").join("") + "</tr>").join("") +
      "</table>";
  }

  // -- kernels ----------------------------------------------------------------------------
  function kernelTable() {
    const cal = data.calibration;
    document.getElementById("calibration").textContent =
      "Calibration: " + cal.text + ".";
    const rows = data.kernels.map(k => {
      const flopsPerS = k.npu_us ? k.flops / (k.npu_us * 1e-6) : 0;
      const bytesPerS = k.npu_us ? k.arg_bytes / (k.npu_us * 1e-6) : 0;
      if (k.npu_us === null) {
        return [esc(k.name), esc(k.grid.join(" x ")), String(k.calls), k.host_us.toFixed(2),
                '<td class="err" colspan="7">no model: ' + esc(k.error || "unknown") + "</td>"];
      }
      return [esc(k.name) + (k.mode === "interpreted" ? " (interp)" : ""),
              esc(k.grid.join(" x ")), String(k.calls), k.host_us.toFixed(2),
              k.npu_us.toFixed(3), k.cores_used + " of " + k.cores, pct(k.util),
              k.bound ? esc(k.bound) + " (" + pct(k.bound_share) + " busy)" : "-",
              fmtNum(flopsPerS, "FLOP/s"), fmtNum(bytesPerS, "B/s"),
              "&plusmn;" + pct(cal.median_error)];
    });
    document.getElementById("kernel-table").innerHTML = data.kernels.length ? table(
      ["kernel", "grid", "calls", "host us (measured)", "NPU us (modelled)", "cores used",
       "core utilization", "bound by", "achieved FLOP/s", "compulsory bytes/s",
       '<span title="the cycle model against the chip, median error per instruction">model error</span>'], rows) :
      "<p>No kernel launches recorded.</p>";
  }

  // -- a zoomable timeline on a canvas ------------------------------------------------------
  // lanes: [{label, group, t[], d[], n[], i[], c?[], w?[], color(n, index) }], arrows:
  // [[laneIndex, t, laneIndex, t]], marks: extra per-lane rectangles drawn under the bars.
  function Timeline(host, lanes, opts) {
    this.host = host; this.lanes = lanes; this.opts = opts || {};
    this.arrows = this.opts.arrows || [];
    this.names = this.opts.names || [];
    let t0 = Infinity, t1 = -Infinity;
    for (const lane of lanes) {
      lane.maxD = 0;
      for (let j = 0; j < lane.t.length; j++) {
        t0 = Math.min(t0, lane.t[j]); t1 = Math.max(t1, lane.t[j] + lane.d[j]);
        lane.maxD = Math.max(lane.maxD, lane.d[j]);
      }
    }
    if (!isFinite(t0)) { t0 = 0; t1 = 1; }
    if (t1 <= t0) t1 = t0 + 1e-3;
    this.full = [Math.min(0, t0), t1];
    this.view = this.full.slice();
    this.canvas = document.createElement("canvas");
    host.appendChild(this.canvas);
    this.rowH = lanes.length * ROW_H > 30000 ? Math.max(4, Math.floor(30000 / lanes.length))
                                             : ROW_H;
    this.bind();
    this.resize();
  }
  Timeline.prototype.resize = function () {
    const ratio = window.devicePixelRatio || 1;
    this.width = Math.max(400, this.host.clientWidth - 2);
    this.height = AXIS_H + this.lanes.length * this.rowH + 4;
    this.canvas.width = this.width * ratio; this.canvas.height = this.height * ratio;
    this.canvas.style.width = this.width + "px"; this.canvas.style.height = this.height + "px";
    this.ctx = this.canvas.getContext("2d");
    this.ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    this.draw();
  };
  Timeline.prototype.x = function (t) {
    return LABEL_W + (t - this.view[0]) * (this.width - LABEL_W) / (this.view[1] - this.view[0]);
  };
  Timeline.prototype.time = function (x) {
    return this.view[0] + (x - LABEL_W) * (this.view[1] - this.view[0]) / (this.width - LABEL_W);
  };
  Timeline.prototype.zoom = function (factor, atX) {
    const at = atX === undefined ? (this.view[0] + this.view[1]) / 2 : this.time(atX);
    const span = Math.max(1e-6, (this.view[1] - this.view[0]) * factor);
    const left = (at - this.view[0]) / (this.view[1] - this.view[0]);
    this.view = [at - left * span, at - left * span + span];
    this.clamp(); this.draw();
  };
  Timeline.prototype.pan = function (dt) {
    this.view = [this.view[0] + dt, this.view[1] + dt]; this.clamp(); this.draw();
  };
  Timeline.prototype.clamp = function () {
    const span = Math.min(this.view[1] - this.view[0], this.full[1] - this.full[0]);
    let a = Math.max(this.full[0], Math.min(this.view[0], this.full[1] - span));
    this.view = [a, a + span];
  };
  Timeline.prototype.reset = function () { this.view = this.full.slice(); this.draw(); };
  Timeline.prototype.bind = function () {
    const c = this.canvas, self = this;
    let drag = null;
    c.addEventListener("wheel", e => {
      e.preventDefault();
      self.zoom(e.deltaY > 0 ? 1.25 : 0.8, e.offsetX);
    }, {passive: false});
    c.addEventListener("mousedown", e => { drag = [e.clientX, self.view.slice()];
                                           c.classList.add("dragging"); });
    window.addEventListener("mouseup", () => { drag = null; c.classList.remove("dragging"); });
    c.addEventListener("mousemove", e => {
      if (drag) {
        const dt = (drag[0] - e.clientX) * (drag[1][1] - drag[1][0]) / (self.width - LABEL_W);
        self.view = [drag[1][0] + dt, drag[1][1] + dt]; self.clamp(); self.draw();
        hideTip();
        return;
      }
      self.hover(e);
    });
    c.addEventListener("mouseleave", hideTip);
    c.addEventListener("dblclick", () => self.reset());
  };
  function lowerBound(arr, v) {
    let lo = 0, hi = arr.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (arr[mid] < v) lo = mid + 1; else hi = mid; }
    return lo;
  }
  Timeline.prototype.draw = function () {
    const ctx = this.ctx, w = this.width, rowH = this.rowH;
    ctx.clearRect(0, 0, w, this.height);
    ctx.font = "11px system-ui, sans-serif";
    this.drawAxis();
    let group = null;
    for (let li = 0; li < this.lanes.length; li++) {
      const lane = this.lanes[li], y = AXIS_H + li * rowH;
      if (lane.group !== group) {
        group = lane.group;
        ctx.fillStyle = "#d5dae3"; ctx.fillRect(0, y, w, 1);
      }
      if (li % 2) { ctx.fillStyle = "#f7f8fa"; ctx.fillRect(LABEL_W, y, w - LABEL_W, rowH); }
      this.drawLane(lane, y);
    }
    this.drawArrows();
    // labels over the lanes' left ends
    ctx.fillStyle = "#fff"; ctx.fillRect(0, AXIS_H, LABEL_W - 2, this.height - AXIS_H);
    group = null;
    for (let li = 0; li < this.lanes.length; li++) {
      const lane = this.lanes[li], y = AXIS_H + li * rowH;
      ctx.fillStyle = lane.group !== group ? "#1d2330" : "#667";
      if (rowH >= 9) ctx.fillText((lane.group !== group ? lane.group + "  " : "") + lane.label,
                                  4, y + rowH - 4);
      group = lane.group;
    }
    const range = document.getElementById(this.opts.rangeId || "");
    if (range) range.textContent = "showing " + fmtUs(this.view[0]) + " to " + fmtUs(this.view[1]);
  };
  Timeline.prototype.drawAxis = function () {
    const ctx = this.ctx, span = this.view[1] - this.view[0];
    ctx.fillStyle = "#eef1f6"; ctx.fillRect(0, 0, this.width, AXIS_H);
    const target = span / 8, mag = Math.pow(10, Math.floor(Math.log10(target)));
    const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= target);
    ctx.fillStyle = "#334"; ctx.strokeStyle = "#c6ccd6";
    for (let t = Math.ceil(this.view[0] / step) * step; t <= this.view[1]; t += step) {
      const x = this.x(t);
      ctx.beginPath(); ctx.moveTo(x, AXIS_H - 5); ctx.lineTo(x, this.height); ctx.stroke();
      ctx.fillText(fmtUs(t), x + 2, 14);
    }
  };
  Timeline.prototype.drawLane = function (lane, y) {
    const ctx = this.ctx, h = this.rowH - 3, scale = (this.width - LABEL_W) / (this.view[1] - this.view[0]);
    const v0 = this.view[0], v1 = this.view[1];
    let j = Math.max(0, lowerBound(lane.t, v0 - lane.maxD) - 1);
    let colX = -1, colBusy = 0;
    const flush = () => {
      if (colX >= 0) {
        ctx.globalAlpha = Math.max(0.25, Math.min(1, colBusy));
        ctx.fillStyle = lane.aggColor || "#556";
        ctx.fillRect(colX, y + 1, 1, h);
        ctx.globalAlpha = 1;
      }
      colX = -1; colBusy = 0;
    };
    for (; j < lane.t.length && lane.t[j] <= v1; j++) {
      const t = lane.t[j], d = lane.d[j];
      if (t + d < v0) continue;
      const x0 = LABEL_W + (t - v0) * scale, x1 = x0 + d * scale;
      if (x1 - x0 < 1) {               // thinner than a pixel: aggregate per pixel column
        const px = Math.floor(Math.max(LABEL_W, x0));
        if (px !== colX) { flush(); colX = px; }
        colBusy += Math.max(x1 - x0, 0.34) * (lane.w ? lane.w[j] / Math.max(d, 1e-12) : 1);
        continue;
      }
      flush();
      const a = Math.max(LABEL_W, x0), b = Math.min(this.width, x1);
      ctx.fillStyle = lane.color(lane.n[j], j);
      ctx.fillRect(a, y + 1, Math.max(1, b - a - (b - a > 3 ? 1 : 0)), h);
      if (lane.hatch && lane.hatch(lane.n[j])) {
        ctx.strokeStyle = "rgba(255,255,255,.7)";
        ctx.beginPath();
        for (let k = a - h; k < b; k += 5) { ctx.moveTo(Math.max(a, k), y + 1 + Math.max(0, a - k));
          ctx.lineTo(Math.min(b, k + h), y + 1 + h - Math.max(0, k + h - b)); }
        ctx.stroke();
      }
      if (lane.outline && lane.outline(j)) {
        ctx.strokeStyle = "#d62728"; ctx.lineWidth = 2;
        ctx.strokeRect(a + 1, y + 2, Math.max(1, b - a - 2), h - 2); ctx.lineWidth = 1;
      }
      if (b - a > 40 && h >= 9) {
        ctx.fillStyle = "#fff";
        const name = this.names[lane.n[j]];
        ctx.save(); ctx.beginPath(); ctx.rect(a, y, b - a - 2, h + 2); ctx.clip();
        ctx.fillText(name, a + 3, y + h - 2); ctx.restore();
      }
    }
    flush();
  };
  Timeline.prototype.drawArrows = function () {
    if (!this.arrows.length) return;
    const ctx = this.ctx, v0 = this.view[0], v1 = this.view[1];
    ctx.strokeStyle = "rgba(214,39,40,.75)"; ctx.fillStyle = "rgba(214,39,40,.75)";
    let drawn = 0;
    for (const [la, ta, lb, tb] of this.arrows) {
      if (Math.max(ta, tb) < v0 || Math.min(ta, tb) > v1) continue;
      if (++drawn > 4000) break;
      const x0 = this.x(ta), x1 = this.x(tb);
      const y0 = AXIS_H + la * this.rowH + this.rowH / 2, y1 = AXIS_H + lb * this.rowH + this.rowH / 2;
      ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x1, y1); ctx.stroke();
      const ang = Math.atan2(y1 - y0, x1 - x0);
      ctx.beginPath(); ctx.moveTo(x1, y1);
      ctx.lineTo(x1 - 6 * Math.cos(ang - 0.4), y1 - 6 * Math.sin(ang - 0.4));
      ctx.lineTo(x1 - 6 * Math.cos(ang + 0.4), y1 - 6 * Math.sin(ang + 0.4));
      ctx.fill();
    }
  };
  Timeline.prototype.hover = function (e) {
    const li = Math.floor((e.offsetY - AXIS_H) / this.rowH), lane = this.lanes[li];
    if (!lane || e.offsetX < LABEL_W) { hideTip(); return; }
    const t = this.time(e.offsetX), slack = 2 * (this.view[1] - this.view[0]) / (this.width - LABEL_W);
    let j = lowerBound(lane.t, t + slack) - 1, hit = -1;
    for (let k = j; k >= 0 && lane.t[k] + lane.maxD >= t - slack; k--) {
      if (lane.t[k] <= t + slack && lane.t[k] + lane.d[k] >= t - slack) { hit = k; break; }
    }
    if (hit < 0) { hideTip(); return; }
    const lines = [lane.group + " / " + lane.label];
    if (lane.c) {
      lines.push(lane.c[hit] + " instructions merged (" + this.names[lane.n[hit]] + ")",
                 "busy " + fmtUs(lane.w[hit]) + " of " + fmtUs(lane.d[hit]));
    } else {
      lines.push(this.names[lane.n[hit]], "duration " + fmtUs(lane.d[hit]),
                 "from " + fmtUs(lane.t[hit]) + " to " + fmtUs(lane.t[hit] + lane.d[hit]));
    }
    if (lane.info) lines.push(lane.info(hit));
    showTip(e, lines.join("\n"));
  };
  function showTip(e, text) {
    const tip = document.getElementById("tooltip");
    tip.textContent = text; tip.hidden = false;
    tip.style.left = Math.min(window.innerWidth - 430, e.clientX + 14) + "px";
    tip.style.top = (e.clientY + 14) + "px";
  }
  function hideTip() { document.getElementById("tooltip").hidden = true; }

  // -- the profile's lanes ----------------------------------------------------------------
  function kernelLanes() {
    const names = data.names;
    const special = {dispatch: "#b8bec9", launch: "#d3d7de", "(several instructions)": "#778"};
    const lanes = data.lanes.map(l => {
      const lane = {label: l.row, group: l.core, key: l.key, t: l.t, d: l.d, n: l.n, i: l.i,
                    c: l.c, w: l.w, aggColor: PIPE_COLORS[l.row] || "#556"};
      if (l.row === "blocks") {
        lane.color = n => special[names[n]] || hashColor(names[n].split("[")[0], 45, 62);
        lane.hatch = n => names[n] === "dispatch" || names[n] === "launch";
      } else if (l.row === "flags") {
        lane.color = n => names[n].startsWith("wait") ? "#d62728" : "#2ca02c";
      } else {
        lane.color = n => special[names[n]] || hashColor(names[n], 55, 48);
      }
      lane.info = j => names[l.i[j]];
      return lane;
    });
    const index = {};
    lanes.forEach((l, k) => { index[l.key] = k; });
    const arrows = data.handoffs.filter(a => a[0] in index && a[2] in index)
      .map(a => [index[a[0]], a[1], index[a[2]], a[3]]);
    const host = document.getElementById("timeline");
    if (!lanes.length) { host.innerHTML = "<p>No modelled launches.</p>"; return null; }
    const tl = new Timeline(host, lanes, {names, arrows, rangeId: "view-range"});
    document.querySelectorAll("[data-zoom]").forEach(b => b.addEventListener("click", () => {
      const z = b.getAttribute("data-zoom");
      if (z === "reset") tl.reset(); else tl.zoom(z === "in" ? 0.5 : 2);
    }));
    window.addEventListener("keydown", e => {
      const span = tl.view[1] - tl.view[0];
      if (e.key === "w") tl.zoom(0.8); else if (e.key === "s") tl.zoom(1.25);
      else if (e.key === "a") tl.pan(-span / 8); else if (e.key === "d") tl.pan(span / 8);
      else if (e.key === "0") tl.reset();
    });
    const used = Array.from(new Set(data.lanes.map(l => l.row)));
    document.getElementById("legend").innerHTML = used.map(r => r === "blocks" ?
      '<span><i style="background:#b8bec9"></i>blocks (hatched: launch and dispatch gaps)</span>' :
      r === "flags" ? '<span><i style="background:#2ca02c"></i>flag set</span>' +
        '<span><i style="background:#d62728"></i>flag wait (red arrow: hand-off to the other core)</span>' :
      '<span><i style="background:' + (PIPE_COLORS[r] || "#556") + '"></i>' + esc(r) + " pipe</span>"
    ).join("");
    return tl;
  }

  // -- roofline ---------------------------------------------------------------------------
  function svg(tag, attrs, text) {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const k in attrs) el.setAttribute(k, attrs[k]);
    if (text !== undefined) el.textContent = text;
    return el;
  }
  function roofline() {
    const host = document.getElementById("roofline-chart");
    const points = data.kernels.filter(k => k.npu_us && k.flops > 0 && k.arg_bytes > 0).map(k => ({
      label: k.name, ai: k.flops / k.arg_bytes, perf: k.flops / (k.npu_us * 1e-6), board: false,
      target: k.target}));
    const anchors = data.board.filter(b => b.flops > 0).map(b => ({
      label: b.kernel + " " + b.size + " (board)", ai: b.flops / b.bytes,
      perf: b.flops / (b.time_us * 1e-6), board: true, target: b.target}));
    const targets = Object.values(data.targets);
    const all = points.concat(anchors);
    const W = 800, H = 420, L = 70, B = 40, T = 12, R = 210;
    const peak = Math.max(...targets.map(t => t.cube_flops));
    const xs = all.map(p => p.ai).concat(targets.map(t => t.cube_flops / t.hbm_bytes));
    const lx0 = Math.floor(Math.log10(Math.min(...xs, 1)) - 0.5);
    const lx1 = Math.ceil(Math.log10(Math.max(...xs, 10)) + 0.5);
    const ly1 = Math.ceil(Math.log10(peak * 1.5));
    const ly0 = Math.min(ly1 - 4, Math.floor(Math.log10(Math.min(...all.map(p => p.perf), peak / 1e3))));
    const X = v => L + (Math.log10(v) - lx0) / (lx1 - lx0) * (W - L - R);
    const Y = v => T + (ly1 - Math.log10(v)) / (ly1 - ly0) * (H - T - B);
    const s = svg("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img"});
    for (let e = lx0; e <= lx1; e++) {
      s.appendChild(svg("line", {x1: X(10 ** e), x2: X(10 ** e), y1: T, y2: H - B, stroke: "#e4e7ec"}));
      s.appendChild(svg("text", {x: X(10 ** e) - 8, y: H - B + 14}, "1e" + e));
    }
    for (let e = ly0; e <= ly1; e++) {
      s.appendChild(svg("line", {x1: L, x2: W - R, y1: Y(10 ** e), y2: Y(10 ** e), stroke: "#e4e7ec"}));
      s.appendChild(svg("text", {x: 4, y: Y(10 ** e) + 4}, fmtNum(10 ** e, "FLOP/s")));
    }
    s.appendChild(svg("text", {x: L + 150, y: H - 6}, "arithmetic intensity (FLOP / compulsory byte)"));
    targets.forEach((t, ti) => {
      const dash = ti ? "6 3" : "";
      const roofs = [["cube fp16", t.cube_flops, "#e15759"], ["vector fp32", t.vector_flops, "#59a14f"]];
      for (const [name, top, color] of roofs) {
        for (const [bw, style] of [[t.hbm_bytes, ""], [t.l2_bytes, "4 3"]]) {
          const xr = top / bw, xa = 10 ** lx0, xb = 10 ** lx1;
          const pts = [[xa, Math.max(10 ** ly0, xa * bw)], [xr, top], [xb, top]]
            .filter(p => p[0] >= xa && p[0] <= xb);
          s.appendChild(svg("polyline", {points: pts.map(p => X(p[0]) + "," + Y(p[1])).join(" "),
            fill: "none", stroke: color, "stroke-width": style ? 1 : 2,
            "stroke-dasharray": style || dash, opacity: style ? 0.6 : 1}));
        }
        s.appendChild(svg("text", {x: W - R + 4, y: Y(top) + 4 + 12 * ti, fill: color},
                          name + " " + fmtNum(top, "FLOP/s") + " " + t.name.replace("ascend", "")));
      }
    });
    for (const p of all) {
      const cx = X(p.ai), cy = Y(p.perf);
      const g = svg("g", {}), title = svg("title", {}, p.label + "\nAI " + p.ai.toFixed(2) +
        " FLOP/B, " + fmtNum(p.perf, "FLOP/s"));
      g.appendChild(title);
      if (p.board) {
        g.appendChild(svg("path", {d: `M${cx},${cy - 5}L${cx + 5},${cy}L${cx},${cy + 5}L${cx - 5},${cy}Z`,
          fill: "#fff", stroke: "#333"}));
      } else {
        g.appendChild(svg("circle", {cx, cy, r: 5, fill: "#2857a4"}));
        g.appendChild(svg("text", {x: cx + 7, y: cy - 6, fill: "#2857a4"}, p.label));
      }
      s.appendChild(g);
    }
    host.innerHTML = "";
    if (!points.length) {
      host.insertAdjacentHTML("beforeend", "<p>No recorded kernel counts FLOPs; the board's kernels are shown.</p>");
    }
    host.appendChild(s);
    bandwidth();
  }
  function bandwidth() {
    const rows = data.kernels.filter(k => k.npu_us && k.arg_bytes > 0).map(k => [k.name,
      k.arg_bytes / (k.npu_us * 1e-6), data.targets[k.target]]);
    const board = data.board.filter(b => !b.flops).map(b => [b.kernel + " " + b.size + " (board)",
      b.bytes / (b.time_us * 1e-6), data.targets[b.target]]);
    const html = rows.concat(board).map(([name, bps, t]) => {
      const share = bps / t.hbm_bytes;
      return [esc(name), fmtNum(bps, "B/s"), pct(share) + " of " + esc(t.name) + "'s HBM",
              '<td style="text-align:left"><span class="bar-track"><span class="bar" style="width:' +
              Math.min(160, 160 * share).toFixed(1) + 'px"></span></span></td>'];
    });
    document.getElementById("bandwidth-chart").innerHTML =
      "<h3>Bandwidth <small>(compulsory bytes over modelled time, against the HBM)</small></h3>" +
      table(["kernel", "bytes/s", "share", ""], html);
  }

  // -- memory -----------------------------------------------------------------------------
  function memory() {
    const rows = [];
    for (const k of data.kernels) {
      if (!k.memory) continue;
      if (k.memory.error) { rows.push([esc(k.name), '<td class="err" colspan="4">' + esc(k.memory.error) + "</td>"]); continue; }
      for (const [buf, [peak, cap]] of Object.entries(k.memory.buffers)) {
        const share = cap ? peak / cap : 0;
        rows.push([esc(k.name), esc(buf), String(peak), String(cap),
          '<td style="text-align:left"><span class="bar-track"><span class="bar" style="width:' +
          Math.min(160, 160 * share).toFixed(1) + 'px"></span></span>' + pct(share) + "</td>"]);
      }
    }
    document.getElementById("memory-table").innerHTML = rows.length ?
      table(["kernel", "buffer", "peak bytes", "capacity", "used"], rows) :
      "<p>No compiled kernel to analyse.</p>";
  }

  // -- graphs -----------------------------------------------------------------------------
  function graphs() {
    const host = document.getElementById("graph-list");
    if (!data.graphs.length) {
      host.innerHTML = "<p>No graph module in this profile (pass them to export_html(..., graphs=[module]) or run them while profiling).</p>";
      return [];
    }
    return data.graphs.map((g, gi) => {
      const div = document.createElement("div");
      div.innerHTML = "<h3>" + esc(g.name) + " <small>" + esc(g.strategy) + ", " + fmtUs(g.time_us) +
        " modelled on " + esc(g.target) + "</small></h3>";
      host.appendChild(div);
      const names = [], nameIndex = {};
      const nm = s => (s in nameIndex ? nameIndex[s] : (nameIndex[s] = names.push(s) - 1));
      const byCore = {};
      g.tasks.forEach(t => (byCore[t.core] = byCore[t.core] || []).push(t));
      g.bubbles.forEach(b => (byCore[b.core] = byCore[b.core] || []));
      const lanes = [];
      for (const core of g.cores) {             // cluster by cluster (html.py)
        const ts = byCore[core].slice().sort((a, b) => a.t - b.t);
        const lane = {label: "tasks", group: core, t: ts.map(t => t.t), d: ts.map(t => t.d),
          n: ts.map(t => nm(t.label)), outline: j => ts[j].critical,
          info: j => "node " + g.nodes[ts[j].node] + (ts[j].critical ? " - on the critical path" : "") +
            "\nready " + fmtUs(ts[j].ready) + ", dispatched " + fmtUs(ts[j].dispatched)};
        const colors = ts.map(t => hashColor(g.nodes[t.node] || "", 55, 52));
        lane.color = (n, j) => colors[j];
        lanes.push(lane);
        const bs = g.bubbles.filter(b => b.core === core).sort((a, b) => a.t - b.t);
        if (bs.length) {
          lanes.push({label: "bubbles", group: core, t: bs.map(b => b.t), d: bs.map(b => b.d),
            n: bs.map(b => nm("idle while " + b.task + " was ready")), color: () => "#f4a6a6",
            hatch: () => true});
        }
      }
      const box = document.createElement("div"); box.className = "timeline";
      div.appendChild(box);
      new Timeline(box, lanes, {names});
      const list = document.createElement("div");
      const idle = g.bubbles.reduce((a, b) => a + b.d, 0);
      list.innerHTML = "<p><b>Critical path</b> (red outline), " + g.critical.length + " task(s): " +
        g.critical.map(esc).join(" &rarr; ") + "</p><p><b>Bubbles</b> (a core idle while a task it could run was ready): " +
        g.bubbles.length + ", " + fmtUs(idle) + " of core time</p>" +
        (g.bubbles.length ? table(["core", "from", "for", "ready task"], g.bubbles.slice(0, 20).map(
          b => [esc(b.core), fmtUs(b.t), fmtUs(b.d), esc(b.task)])) : "") +
        '<pre class="report">' + esc(g.report) + "</pre>";
      div.appendChild(list);
      return gi;
    });
  }

  // -- main -------------------------------------------------------------------------------
  window.addEventListener("error", e => {
    body.setAttribute("data-status", "error");
    body.setAttribute("data-error", String(e.message));
  });
  const t0 = performance.now();
  kernelTable();
  const tl = kernelLanes();
  roofline();
  memory();
  graphs();
  if (tl) window.addEventListener("resize", () => tl.resize());
  body.setAttribute("data-lanes", String(tl ? tl.lanes.length : 0));   // rows drawn
  body.setAttribute("data-render-ms", (performance.now() - t0).toFixed(1));
  if (body.getAttribute("data-status") === "loading") body.setAttribute("data-status", "ok");
})();
