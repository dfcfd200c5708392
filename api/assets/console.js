// kuatia console: small enhancements only; every flow works without this file.
// - the issue form: live line totals and IVA (the server computes them again, by the same rules,
//   and checks them through the validate use case);
// - a form marked data-once submits once (a double click issues one document even before the
//   idempotency key is checked on the server);
// - the credit-note fields show only for a credit note;
// - a value shown once (a new API key, an invitation link) gets a copy button;
// - the setup wizard: the RUC's check digit checked as typed (the server checks it again), and a
//   department or district chosen redraws the form with its districts and cities;
// - the operators' room reloads itself every two seconds while a rebuild or verification runs.
(function () {
  "use strict";
  function parse(text) {
    var t = String(text || "").trim().replace(/\./g, "").replace(",", ".");
    if (t === "") { return null; }
    var n = Number(t);
    return isFinite(n) ? n : null;
  }
  // SET's check digit (modulo 11 with weights 2 to 11 from the right), as domain::check_digit.
  function modulo11(digits) {
    var total = 0, weight = 2;
    for (var i = digits.length - 1; i >= 0; i--) {
      if (weight > 11) { weight = 2; }
      total += Number(digits[i]) * weight;
      weight++;
    }
    var r = total % 11;
    return r > 1 ? 11 - r : 0;
  }
  function halfUp(x) { return x < 0 ? -Math.round(-x) : Math.round(x); }
  function money(n) {
    var s = String(Math.abs(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ".");
    return "Gs. " + (n < 0 ? "-" : "") + s;
  }
  function recompute(form) {
    var sub = 0, t5 = 0, t10 = 0, grand = 0;
    form.querySelectorAll("tr.line").forEach(function (row) {
      var q = parse(row.querySelector("[name=quantity]").value);
      var p = parse(row.querySelector("[name=unit_price]").value);
      var rate = Number(row.querySelector("[name=tax_rate]").value);
      var cell = row.querySelector(".line-total");
      if (q === null || p === null) { cell.textContent = ""; return; }
      var total = halfUp(q * p);
      var tax = rate > 0 ? halfUp(total * rate / (100 + rate)) : 0;
      if (rate === 5) { t5 += tax; } else if (rate === 10) { t10 += tax; }
      grand += total;
      cell.textContent = money(total);
    });
    sub = grand - t5 - t10;
    var set = function (id, v) { var el = document.getElementById(id); if (el) { el.textContent = money(v); } };
    set("total-subtotal", sub); set("total-tax5", t5); set("total-tax10", t10);
    var g = document.getElementById("total-grand");
    if (g) { g.innerHTML = ""; var strong = document.createElement("strong"); strong.textContent = money(grand); g.appendChild(strong); }
  }
  function creditFields(form) {
    var type = form.querySelector("[name=type]");
    var show = type && type.value === "credit_note";
    form.querySelectorAll(".credit-note-only").forEach(function (el) { el.hidden = !show; });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("issue-form");
    if (form) {
      form.addEventListener("input", function () { recompute(form); });
      form.addEventListener("change", function () { recompute(form); creditFields(form); });
      creditFields(form);
      form.addEventListener("submit", function (event) {
        var button = event.submitter;
        if (button && button.dataset.once === "true") {
          if (form.dataset.sent === "true") { event.preventDefault(); return; }
          form.dataset.sent = "true";
          // Disabled after the submission has taken the button's name and value.
          setTimeout(function () { button.disabled = true; }, 0);
        }
      });
    }
    document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
      var source = document.getElementById(button.dataset.copy);
      if (!source || !navigator.clipboard) { return; }
      button.hidden = false;
      button.addEventListener("click", function () {
        navigator.clipboard.writeText(source.value).then(function () {
          button.textContent = button.dataset.done || button.textContent;
        });
      });
    });
    var ruc = document.querySelector("input[data-ruc]");
    var said = document.getElementById("ruc-check");
    if (ruc && said) {
      ruc.addEventListener("input", function () {
        var m = /^\s*(\d{1,8})-(\d)\s*$/.exec(ruc.value);
        if (!m) { said.textContent = ruc.value.trim() === "" ? "" : said.dataset.format; return; }
        var dv = modulo11(m[1]);
        said.textContent = dv === Number(m[2]) ? said.dataset.ok : said.dataset.bad.replace("§", String(dv));
      });
    }
    document.querySelectorAll("select[data-refresh]").forEach(function (select) {
      select.addEventListener("change", function () {
        var button = select.form && select.form.querySelector("button[value=places]");
        if (button) { select.form.requestSubmit(button); }
      });
    });
    if (document.querySelector("#task-state[data-state=running]")) {
      setTimeout(function () { window.location.reload(); }, 2000);
    }
    var once = document.getElementById("once-value");
    if (once) { once.addEventListener("focus", function () { once.select(); }); }
    var link = document.getElementById("public-link");
    if (link) { link.addEventListener("focus", function () { link.select(); }); }
  });
})();
