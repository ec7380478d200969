/* Leaderboard: headline table, full tables rendered from data files on demand (sorted,
   filtered, paged). Plain JavaScript, no network: data files are script elements. The Pareto
   charts (charts.js) share the data files and the filters through window.UQ. */
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  var PAGE = 100;           // rows rendered at a time in a full table
  var PREFERRED = "~preferred";
  var CELLS = 9;            // fields of a data row before its cells (benchmark.report.pagedata.CELLS)
  var head = JSON.parse(document.getElementById("uq-headline").textContent);
  var ANCHORS = head.anchors || {};

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  /* ---- number formats (as benchmark.report.tables.fmt_metric / fmt_num) ---- */
  function fmtMetric(v) {
    if (v === null || v === undefined || isNaN(v)) return "NaN";
    return Math.abs(v) < 0.1 ? v.toFixed(5) : v.toFixed(4);
  }
  function fmtDiff(v) {
    if (v === null || v === undefined || isNaN(v)) return "";
    return (v >= 0 ? "+" : "\u2212") + fmtMetric(Math.abs(v));
  }
  function fmtCount(v) {  /* as benchmark.report.tables.fmt_count: 0, 500, 4.0k, 16k, 3.4M */
    var units = ["", "k", "M", "G", "T", "P"], i = 0;
    while (v >= 999.5 && i < units.length - 1) { v = v / 1000; i++; }
    var d = i && v < 9.95 ? 1 : 0, p = Math.pow(10, d);
    return (Math.floor(v * p + 0.5) / p).toFixed(d) + units[i];
  }
  function fmtCost(v, spec, scale) {
    if (v === null || v === undefined || isNaN(v) || v < 0) return "\u2014";
    v = v / (scale || 1);
    if (spec === "si") return fmtCount(v);
    var m = /^\.(\d+)([fg])$/.exec(spec || ".4g");
    if (!m) return String(v);
    var d = parseInt(m[1], 10);
    return m[2] === "f" ? v.toFixed(d) : String(parseFloat(v.toPrecision(d)));
  }
  function sortText(v) { return v === null || v === undefined || isNaN(v) ? "NaN" : String(parseFloat(v.toPrecision(7))); }

  /* ---- data files: loaded as script elements that call UQ.put(key, data) ---- */
  var store = {}, waiting = {};
  window.UQ = {
    put: function (key, data) {
      store[key] = data;
      (waiting[key] || []).forEach(function (f) { f(data); });
      delete waiting[key];
    }
  };
  function loadData(key, file, then, failed) {
    if (store[key]) return then(store[key]);
    if (!waiting[key]) {
      waiting[key] = [];
      var s = document.createElement("script");
      s.src = file;
      s.onerror = function () { (failed || function () {})(); };
      document.body.appendChild(s);
    }
    waiting[key].push(then);
  }
  function load(det, then) {
    loadData(det.dataset.key, det.dataset.file, then, function () {
      det.querySelector(".no-match").textContent = "Could not load " + det.dataset.file + ".";
      det.querySelector(".no-match").hidden = false;
    });
  }

  /* ---- full tables ---- */
  var states = new WeakMap();   // details.split -> {data, order, shown, sortCol, asc}

  function cellValue(data, row, c) {
    var col = data.columns[c], v = row[CELLS + c];
    if (col.metric) return v ? v[0] : null;
    if (col.num) return v;
    return Array.isArray(v) ? data.s[v[0]] : data.s[v];
  }

  /* the columns a full table shows: the method (the row's name) and those ticked in its suite's chooser */
  function visibleColumns(det, data) {
    var form = det.closest("section.suite").querySelector("form.filters"), on = {};
    form.querySelectorAll("input[name=col]").forEach(function (b) { on[b.value] = b.checked; });
    var cols = [];
    data.columns.forEach(function (c, i) { if (i === 0 || (c.key in on ? on[c.key] : c.show)) cols.push(i); });
    return { cols: cols, provenance: !!on.provenance };
  }

  function buildHead(det, data, vis) {
    var table = det.querySelector("table.results"), tr = el("tr"), st = states.get(det);
    vis.cols.forEach(function (i) {
      var c = data.columns[i], th = el("th", (c.num ? "num" : "text") + (i === 0 ? " row-name" : ""));
      th.title = c.title; th.setAttribute("scope", "col");
      th.setAttribute("aria-sort", st && st.sortCol === i ? (st.asc ? "ascending" : "descending") : "none");
      if (c.metric) th.dataset.metric = c.key;
      var b = el("button", "sort", c.label);
      b.type = "button"; b.dataset.col = i; b.dataset.num = c.num ? "1" : "0";
      th.appendChild(b); tr.appendChild(th);
    });
    if (vis.provenance) {
      var prov = el("th", "text", "Provenance");
      prov.title = "models used (links to their provenance) and the hash of the inputs";
      prov.setAttribute("scope", "col");
      tr.appendChild(prov);
    }
    table.tHead.replaceChildren(tr);
  }

  function renderRow(data, row, vis) {
    var s = data.s, tr = el("tr");
    tr.dataset.base = s[row[0]]; tr.dataset.family = s[row[1]];
    tr.dataset.fit = s[row[2]]; tr.dataset.confidence = s[row[3]];
    tr.dataset.balance = sortText(row[5]);
    vis.cols.forEach(function (i) {
      var c = data.columns[i], v = row[CELLS + i], td;
      if (i === 0) {  /* the row's name: a row header, fixed while the table scrolls sideways */
        td = el("th", "t row-name", Array.isArray(v) ? s[v[0]] : s[v]);
        td.setAttribute("scope", "row");
      } else if (c.metric) {
        td = el("td", v[0] === null ? "nan" : "", fmtMetric(v[0]));
        td.dataset.sort = sortText(v[0]);
        if (v[1] !== null && v[2] !== null) td.appendChild(el("span", "ci", "[" + fmtMetric(v[1]) + ", " + fmtMetric(v[2]) + "]"));
      } else if (c.num) {
        td = el("td", "", fmtCost(v, c.fmt, c.scale));
        td.dataset.sort = sortText(v);
      } else if (Array.isArray(v)) {
        td = el("td", "t", s[v[0]]);
        if (s[v[1]]) td.title = s[v[1]];
      } else {
        td = c.key === "models" ? membersCell(s[v]) : el("td", "t", s[v]);
      }
      tr.appendChild(td);
    });
    if (vis.provenance) tr.appendChild(provenanceCell(s, row));
    return tr;
  }

  /* "a + b + c": each model's name kept on one line, the cell wraps between them */
  function membersCell(text) {
    var td = el("td", "t members");
    String(text).split(" + ").forEach(function (n, i) {
      if (i) td.appendChild(document.createTextNode(" + "));
      td.appendChild(el("span", "name", n));
    });
    return td;
  }

  function provenanceCell(s, row) {
    var prov = el("td", "t prov");
    row[7].forEach(function (m, i) {
      if (i) prov.appendChild(document.createTextNode(" + "));
      var a = el("a", "", s[m]);
      a.href = "#" + (ANCHORS[s[m]] || "");
      prov.appendChild(a);
    });
    if (s[row[6]]) {
      prov.appendChild(document.createTextNode(" "));
      var code = el("code", "", s[row[6]].slice(0, 12));
      code.title = "inputs_hash " + s[row[6]];
      prov.appendChild(code);
    }
    return prov;
  }

  function passes(data, row, want, range) {
    var s = data.s, vals = { base: s[row[0]], family: s[row[1]], fit: s[row[2]], confidence: s[row[3]] };
    var pref = { fit: row[4] & 1, confidence: row[4] & 2 };
    for (var k in want) {
      if (!want[k]) continue;
      if (want[k] === PREFERRED ? !pref[k] : vals[k] !== want[k]) return false;
    }
    if (range.on) {
      var b = row[5];
      if (b === null) return range.keepNone;
      if (!isNaN(range.min) && b < range.min) return false;
      if (!isNaN(range.max) && b > range.max) return false;
    }
    return true;
  }

  function selection(form) {
    var f = function (n) { return form.elements.namedItem(n); };
    var want = { base: f("base").value, family: f("family").value, fit: f("fit").value, confidence: f("confidence").value };
    var range = { min: parseFloat(f("bmin").value), max: parseFloat(f("bmax").value), keepNone: f("nobalance").checked };
    range.on = !isNaN(range.min) || !isNaN(range.max);
    return { want: want, range: range, ci: f("ci").checked };
  }

  function render(det) {
    var st = states.get(det);
    if (!st) return;
    var data = st.data, sel = selection(det.closest("section.suite").querySelector("form.filters"));
    var rows = st.order.filter(function (i) { return passes(data, data.rows[i], sel.want, sel.range); });
    var vis = visibleColumns(det, data);
    buildHead(det, data, vis);
    var tbody = det.querySelector("table.results").tBodies[0], frag = document.createDocumentFragment();
    rows.slice(0, st.shown).forEach(function (i) { frag.appendChild(renderRow(data, data.rows[i], vis)); });
    tbody.replaceChildren(frag);
    var total = data.rows.length;
    det.querySelector(".count").textContent = rows.length === total ? total + " rows" : rows.length + " of " + total + " rows";
    det.querySelector(".no-match").hidden = rows.length > 0;
    var pager = det.querySelector(".pager");
    pager.hidden = rows.length <= st.shown;
    pager.querySelector("button").textContent = "Show " + Math.min(PAGE, rows.length - st.shown) + " more of " + (rows.length - st.shown) + " hidden rows";
  }

  function sortRows(st, col, numeric, ascending) {
    var data = st.data;
    var keys = data.rows.map(function (r) { return cellValue(data, r, col); });
    st.order = data.rows.map(function (_, i) { return i; });
    st.order.sort(function (a, b) {
      var ka = keys[a], kb = keys[b];
      if (numeric) {
        var an = ka === null || isNaN(ka), bn = kb === null || isNaN(kb);
        if (an || bn) return an === bn ? a - b : (an ? 1 : -1);
        return (ascending ? ka - kb : kb - ka) || a - b;
      }
      var c = String(ka).localeCompare(String(kb));
      return (ascending ? c : -c) || a - b;
    });
  }

  function openSplit(det) {
    if (states.get(det) || !det.open) return;
    load(det, function (data) {
      if (states.get(det)) return;
      states.set(det, { data: data, order: data.rows.map(function (_, i) { return i; }), shown: PAGE, sortCol: -1 });
      render(det);
      det.dataset.ready = "1";
      if (window.performance && performance.mark) performance.mark("uq-table");
    });
  }

  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("table.results th button.sort");
    if (btn) {
      var th = btn.parentElement, det = th.closest("details.split"), st = states.get(det);
      var ascending = th.getAttribute("aria-sort") !== "ascending", col = parseInt(btn.dataset.col, 10);
      st.sortCol = col; st.asc = ascending;
      sortRows(st, col, btn.dataset.num === "1", ascending);
      render(det);
      var again = det.querySelector("table.results thead button.sort[data-col='" + col + "']");
      if (again) again.focus();
      return;
    }
    var more = ev.target.closest(".pager button");
    if (more) {
      var d = more.closest("details.split");
      states.get(d).shown += PAGE;
      render(d);
    }
  });

  // shared with the charts (charts.js)
  window.UQ.CELLS = CELLS;
  window.UQ.load = loadData;
  window.UQ.passes = passes;
  window.UQ.selection = selection;
  window.UQ.fmtMetric = fmtMetric;
  window.UQ.fmtCost = fmtCost;

  document.querySelectorAll("details.split").forEach(function (det) {
    det.addEventListener("toggle", function () { openSplit(det); });
    openSplit(det);
  });

  document.querySelectorAll("form.filters").forEach(function (form) {
    var suite = form.closest("section.suite");
    var apply = function () {
      suite.classList.toggle("show-ci", form.elements.namedItem("ci").checked);
      suite.querySelectorAll("details.split").forEach(render);
    };
    form.addEventListener("input", apply);
    form.addEventListener("change", apply);
    form.addEventListener("reset", function () { setTimeout(apply, 0); });
    apply();
  });

  /* ---- headline ---- */
  var hform = document.querySelector("form.headline-controls");
  var hf = function (n) { return hform.elements.namedItem(n); };

  function option(sel, value, text) {
    var o = el("option", "", text);
    o.value = value;
    sel.appendChild(o);
  }
  head.suites.forEach(function (s, i) { option(hf("suite"), i, s.name); });

  function fillSplits() {
    var suite = head.suites[hf("suite").value], sel = hf("split");
    sel.replaceChildren();
    if (!suite) return;
    suite.splits.forEach(function (sp, i) { option(sel, i, sp.name); });
  }

  var SOURCE = { 8: "own", 16: "fallback" };
  function seedSource(v) { return SOURCE[v[4] & 24] || "none"; }
  function seedText(v) {
    var src = seedSource(v);
    if (src === "none") return "no training-seed spread measured for this difference";
    return "seed sd of this kind of difference " + fmtMetric(v[5]) + (src === "own"
      ? " (over the " + v[6] + " seeds of its seed group)"
      : " (fallback: the largest such spread of this split and metric, " + v[6] + " seeds)");
  }

  function metricCell(i, e, primary, withCi) {
    var v = e.m[i], td = el("td", "num" + (primary ? " primary" : ""));
    td.dataset.sort = sortText(v[0]);
    td.appendChild(el("span", "v", fmtMetric(v[0])));
    if (e.k !== "alone" && v[1] !== null) {
      var d = el("span", "d", "\u0394 " + fmtDiff(v[1]));
      if (withCi && v[2] !== null && v[3] !== null) d.appendChild(el("span", "dci", " [" + fmtDiff(v[2]) + ", " + fmtDiff(v[3]) + "]"));
      var within = (v[4] & 4) !== 0, known = (v[4] & 24) !== 0;
      if (v[4] & 3) {
        var sig = v[4] & 1 ? "better" : "worse", finding = known && !within;
        var mark = el("span", "mark " + sig + (finding ? " finding" : " not-finding"), sig === "better" ? "\u25B2" : "\u25BC");
        mark.title = "the paired-bootstrap interval of \u0394 excludes 0: " + sig + " than the base alone" + (finding
          ? "; outside the training-seed noise: a finding"
          : within ? "; but |\u0394| is within the training-seed noise: not a finding" : "; training-seed noise unmeasured");
        d.appendChild(mark);
      }
      if (within) {
        var w = el("span", "mark seed", "\u2248");
        w.title = "within training-seed noise: |\u0394| \u2264 " + head.factor + " \u00D7 " + seedText(v);
        d.appendChild(w);
        td.classList.add("within-noise");
      }
      td.title = seedText(v);
      td.appendChild(d);
    }
    return td;
  }

  function noiseNote(split, i, label) {
    var note = document.querySelector(".noise-note"), v = split && split.noise ? split.noise[i] : null;
    var dominated = !!(v && v[2]);
    note.hidden = !dominated;
    if (dominated) {
      note.replaceChildren(el("strong", "", "Differences on this split are within the training-seed spread: shown, not ranked."),
        document.createTextNode(" " + label + ": the median |\u0394| of the rows below, " + fmtMetric(v[1]) + ", is under " +
          head.factor + " \u00D7 " + fmtMetric(v[0]) + ", the largest spread of a model alone across its training seeds; " +
          "the rows keep a fixed order (by base), with no rank."));
    }
    return dominated;
  }

  /* a page merged from several sources (the site: bundles): where each headline row comes from */
  var SOURCES = head.sources || null;
  function sourceCell(src, cf) {
    var td = el("td", "t source");
    (src ? src.split(" ") : []).forEach(function (id, i) {
      var info = SOURCES[id] || {};
      if (i) td.appendChild(document.createTextNode(" + "));
      var a = el("a", "", id);
      if (info.link) a.href = info.link;
      td.appendChild(a);
      td.appendChild(document.createTextNode(" "));
      td.appendChild(el("span", "badge " + (info.status === "verified" ? "verified" : "self-reported"), info.status || "?"));
      td.appendChild(el("span", "who", " " + (info.contributor || "")));
    });
    if (cf) {
      var w = el("span", "mark conflict", " \u26A0");
      w.title = "another bundle of the same status gives other values for this row: " + cf.split(" ").join(", ");
      td.appendChild(w);
      td.classList.add("conflict");
    }
    return td;
  }

  /* the headline's columns: the row (rank and role, a row header), the ranked metric, then those ticked in its
     column chooser (name=col) in this order */
  var HEAD_COLS = [
    { key: "method", label: "Method", cls: "text" }, { key: "models", label: "Models", cls: "text" },
    { key: "gflops", label: "GFLOPs", cls: "num" },
    { key: "ti", label: "Train img", cls: "num", title: "training budget: training images processed to make the row's " +
      "models (epochs x images x members), summed over every training run behind it, the fine-tunes it builds on included" },
    { key: "tp", label: "Trained params", cls: "num", title: "training budget: parameters trained, summed over the training runs behind the row" },
    { key: "seed", label: "Seed noise", cls: "text" }
  ];
  function headChosen() {
    var on = {};
    hform.querySelectorAll("input[name=col]").forEach(function (b) { on[b.value] = b.checked; b.disabled = b.value === hf("metric").value; });
    return on;
  }

  function renderHeadline() {
    var table = document.getElementById("headline-table");
    var suite = head.suites[hf("suite").value], split = suite && suite.splits[hf("split").value];
    var metric = hf("metric").value, withCi = hf("ci").checked, on = headChosen();
    var mi = head.metrics.findIndex(function (m) { return m.key === metric; });
    var label = mi >= 0 ? head.metrics[mi].label : metric;
    var dominated = noiseNote(split, mi, label);
    table.classList.toggle("unranked", dominated);
    var cols = HEAD_COLS.filter(function (c) { return on[c.key]; });
    var others = head.metrics.map(function (m, i) { return i; }).filter(function (i) { return i !== mi && on[head.metrics[i].key]; });
    var th = function (cls, text, title) {
      var h = el("th", cls, text);
      h.setAttribute("scope", "col");
      if (title) h.title = title;
      return h;
    };
    var metricHead = function (i, primary) {
      var m = head.metrics[i], h = th("num" + (primary ? " primary" : ""), m.label + (m.hib ? " \u2191" : " \u2193"),
        primary ? "ranked by " + m.label + "; under each value, \u0394 to the same base alone" : null);
      h.dataset.metric = m.key;
      return h;
    };
    var tr = el("tr");
    tr.appendChild(th("text row-name", dominated ? "Row (not ranked)" : "# \u00A0Row"));
    if (mi >= 0) tr.appendChild(metricHead(mi, true));
    cols.forEach(function (c) {
      tr.appendChild(th(c.cls, c.label, c.key === "seed" ? "where the training-seed noise of the difference to the base alone (" +
        label + ") comes from: own = the spread over the seeds of its seed group; fallback = the largest spread of this " +
        "split and metric; none = unmeasured" : c.title));
    });
    others.forEach(function (i) { tr.appendChild(metricHead(i, false)); });
    var withSource = SOURCES && on.source;
    if (withSource) {
      tr.appendChild(th("text", "Source", "the bundle the row's values come from, its status and contributor; \u26A0: " +
        "another bundle of the same status gives other values for this row"));
    }
    table.tHead.replaceChildren(tr);
    var body = document.createDocumentFragment(), order = split ? (split.order[metric] || []) : [];
    order.forEach(function (o, rank) {
      var e = split.entries[o[0]], row = el("tr", "kind-" + e.k), pm = mi >= 0 ? e.m[mi] : null;
      row.dataset.base = e.b;
      if (e.k !== "alone" && pm && (pm[4] & 4)) row.classList.add("within-noise");
      var name = el("th", "t row-name");
      name.setAttribute("scope", "row");
      if (!dominated) name.appendChild(el("span", "rank", String(rank + 1)));
      name.appendChild(el("span", "role", o[1]));
      name.appendChild(el("span", "who", e.o));  /* the models, under the role where the Models column is off screen */
      row.appendChild(name);
      if (mi >= 0) row.appendChild(metricCell(mi, e, true, withCi));
      cols.forEach(function (c) {
        var td;
        if (c.key === "method") { td = el("td", "t method", e.l); td.title = e.v; }
        else if (c.key === "models") td = membersCell(e.o);
        else if (c.key === "gflops") { td = el("td", "num gflops", fmtCost(e.g, ".3g")); td.dataset.sort = sortText(e.g); }
        else if (c.key === "ti" || c.key === "tp") {
          var v = c.key === "ti" ? e.ti : e.tp;
          td = el("td", "num " + c.key, fmtCost(v, "si"));
          td.dataset.sort = sortText(v);
        } else {
          td = el("td", "t seed-source", e.k === "alone" || !pm ? "" : seedSource(pm) + (seedSource(pm) === "own" ? " (" + pm[6] + " seeds)" : ""));
          if (e.k !== "alone" && pm) td.title = seedText(pm);
        }
        row.appendChild(td);
      });
      others.forEach(function (i) { row.appendChild(metricCell(i, e, false, withCi)); });
      if (withSource) row.appendChild(sourceCell(e.src, e.cf));
      body.appendChild(row);
    });
    table.tBodies[0].replaceChildren(body);
    document.querySelector(".headline-empty").hidden = order.length > 0;
    var key = suite && split ? suite.name + "/" + split.name : "";
    document.querySelectorAll(".headline-figs").forEach(function (d) { d.hidden = d.dataset.key !== key; });
    renderSpread(split);
  }

  function renderSpread(split) {
    var det = document.getElementById("seed-spread"), table = det.querySelector("table.spread");
    var recs = split ? split.spread : [];
    var tr = el("tr");
    tr.appendChild(el("th", "text row-name", "Model (seeds)"));
    head.metrics.forEach(function (m) { tr.appendChild(el("th", "num", m.label + (m.hib ? " \u2191" : " \u2193"))); });
    tr.querySelectorAll("th").forEach(function (h) { h.setAttribute("scope", "col"); });
    table.tHead.replaceChildren(tr);
    var body = document.createDocumentFragment();
    recs.forEach(function (r) {
      var row = el("tr"), name = el("th", "t row-name", r.w + " (" + r.n + ")");
      name.setAttribute("scope", "row");
      row.appendChild(name);
      head.metrics.forEach(function (m, i) {
        var s = r.m[i], td = el("td", "num");
        if (s) {
          td.appendChild(el("span", "v", fmtMetric(s[0]) + " \u00B1 " + fmtMetric(s[1])));
          td.appendChild(el("span", "d", "[" + fmtMetric(s[2]) + ", " + fmtMetric(s[3]) + "]"));
          var dd = r.d ? r.d[i] : null;
          if (dd) td.appendChild(el("span", "d", "\u0394 " + fmtDiff(dd[0]) + " \u00B1 " + fmtMetric(dd[1])));
        } else td.textContent = "\u2014";
        row.appendChild(td);
      });
      body.appendChild(row);
    });
    table.tBodies[0].replaceChildren(body);
    det.querySelector(".count").textContent = recs.length + " rows";
    det.querySelector(".spread-empty").hidden = recs.length > 0;
  }

  hform.addEventListener("change", function (ev) {
    if (ev.target.name === "suite") fillSplits();
    renderHeadline();
  });
  /* a column chooser (details) closes on Escape, the focus back on its summary */
  document.addEventListener("keydown", function (ev) {
    var open = ev.key === "Escape" && ev.target.closest && ev.target.closest("details.columns[open]");
    if (open) { open.open = false; open.querySelector("summary").focus(); }
  });
  fillSplits();
  renderHeadline();
  if (window.performance && performance.mark) performance.mark("uq-headline");

  /* ---- links into closed <details>: open them ---- */
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    for (var e = id && document.getElementById(id); e; e = e.parentElement) {
      if (e.tagName === "DETAILS") e.open = true;
    }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
})();
