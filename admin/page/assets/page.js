// The live page's script: it follows the server-sent event stream and
// sends the form without a reload. The page works without it.
"use strict";
(function () {
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function rate(f) { return (Math.round(f * 10) / 10).toFixed(1); }
  function fill(id, rows, cols, empty) {
    var body = document.querySelector("#" + id + " tbody");
    if (!body) return;
    var out = document.createDocumentFragment();
    if (!rows || rows.length === 0) {
      var tr = el("tr"), td = el("td", empty);
      td.colSpan = cols;
      tr.appendChild(td);
      out.appendChild(tr);
    }
    (rows || []).forEach(function (cells) {
      var tr = el("tr");
      cells.forEach(function (c) { tr.appendChild(c); });
      out.appendChild(tr);
    });
    body.replaceChildren(out);
  }
  function ruleHead(text) { var th = el("th", text, "key"); th.scope = "row"; return th; }
  function show(s) {
    fill("rules", (s.rules || []).map(function (r) {
      return [ruleHead(r.rule), el("td", rate(r.allowed_per_sec)), el("td", rate(r.limited_per_sec)), el("td", rate(r.shadow_per_sec)),
        el("td", r.allowed), el("td", r.limited), el("td", r.shadow)];
    }), 7, "No decisions yet.");
    fill("top", (s.top || []).map(function (t) {
      return [el("td", t.key, "key"), el("td", t.rule, "key"), el("td", t.count), el("td", t.error)];
    }), 4, "No key limited.");
    fill("refusals", (s.refusals || []).map(function (r) {
      return [el("td", r.time.replace(/\.\d+/, "")), el("td", r.outcome, "txt"), el("td", r.rule, "key"), el("td", r.key || "\u2014", "key")];
    }), 4, "No refusal yet.");
    var up = document.getElementById("updated");
    if (up) { up.textContent = s.time.replace(/\.\d+/, ""); up.setAttribute("datetime", s.time); }
    var st = document.getElementById("store");
    if (st && s.store) {
      var dl = el("dl");
      [["Store", s.store.name], ["Connected", s.store.connected ? "yes" : "no: it has not answered yet"], ["Circuit breaker", s.store.breaker]]
        .concat(s.store.failure_mode ? [["Failure mode", s.store.failure_mode]] : [])
        .forEach(function (p) { dl.appendChild(el("dt", p[0])); dl.appendChild(el("dd", p[1])); });
      st.replaceChildren(dl);
    }
  }
  var live = document.getElementById("live");
  if (window.EventSource) {
    var es = new EventSource("/page/events");
    es.addEventListener("snapshot", function (ev) {
      show(JSON.parse(ev.data));
      if (live) live.textContent = "Live.";
    });
    es.onerror = function () { if (live) live.textContent = "Reconnecting to the live stream…"; };
  }
  var form = document.getElementById("try");
  var result = document.getElementById("try-result");
  if (form && result && window.fetch) {
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      fetch("/page/try?format=json", { method: "POST", body: new URLSearchParams(new FormData(form)) })
        .then(function (r) { return r.json(); })
        .then(function (t) {
          if (t.error) { result.replaceChildren(el("p", t.error, "error")); return; }
          if (!t.matched) { var p = el("p", "No rule matches: " + t.code + "."); p.id = "try-code"; result.replaceChildren(p); return; }
          var dl = el("dl");
          [["Code", t.code, "try-code"], ["Limit", t.limit + (t.name ? " (" + t.name + ")" : "")], ["Remaining", t.remaining, "try-remaining"], ["Resets in", t.reset_after || ""]]
            .forEach(function (p) { dl.appendChild(el("dt", p[0])); var dd = el("dd", p[1]); if (p[2]) dd.id = p[2]; dl.appendChild(dd); });
          result.replaceChildren(dl);
          if (t.at_limit) { var f = el("p", "At the limit: the next request is refused."); f.id = "try-full"; result.appendChild(f); }
        })
        .catch(function (e) { result.replaceChildren(el("p", "The request failed: " + e, "error")); });
    });
  }
})();
