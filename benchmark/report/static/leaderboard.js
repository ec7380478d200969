/* Leaderboard: full tables rendered from data files on demand (sorted, filtered, paged, columns chosen). Plain
   JavaScript, no network: data files are script elements. The headline (headline.js) and the Pareto charts
   (charts.js) share the data files, the filters and the formats through window.UQ. */
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

  /* ---- data files: loaded as script elements that call UQ.put(key, data); a file that failed to load is
     remembered, so every caller, then and later, hears so (its own "failed"), none waits for ever ---- */
  var store = {}, waiting = {}, missing = {};
  window.UQ = {
    put: function (key, data) {
      store[key] = data;
      (waiting[key] || []).forEach(function (w) { w.then(data); });
      delete waiting[key];
    }
  };
  function loadData(key, file, then, failed) {
    failed = failed || function () {};
    if (store[key]) return then(store[key]);
    if (missing[key]) return failed();
    if (!waiting[key]) {
      waiting[key] = [];
      var s = document.createElement("script");
      s.src = file;
      s.onerror = function () {
        var ws = waiting[key] || [];
        missing[key] = true;
        delete waiting[key];
        ws.forEach(function (w) { w.failed(); });
      };
      document.body.appendChild(s);
    }
    waiting[key].push({ then: then, failed: failed });
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
  // shared with the headline (headline.js)
  window.UQ.head = head;
  window.UQ.el = el;
  window.UQ.fmtDiff = fmtDiff;
  window.UQ.sortText = sortText;
  window.UQ.membersCell = membersCell;

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
