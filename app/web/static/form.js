// The plan form's checks in the page: every empty required field, every number out of the
// API's range (data-min/data-max, rendered from the request schema) and the GPUs-vs-nodes
// conflict are flagged at once beside their fields, in the server's words, before a round
// trip. The server makes the same checks (app/web/form_checks.py) for pages without script.
(function () {
  "use strict";

  var DECIMAL = /^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;
  var WHOLE_WORDS = "a whole number (ASCII digits 0-9 only, such as 8)";
  var DECIMAL_WORDS = "a number (ASCII digits with an optional '.' and exponent, such as 50, 0.5 or 50e9)";

  function fmt(n) { return Number(n).toLocaleString("en-US"); }

  function value(form, name) {
    var el = form.elements[name];
    return el && !el.disabled ? String(el.value || "").trim() : "";
  }

  function numberError(input) {
    var text = input.value.trim(), label = input.dataset.label;
    var whole = input.dataset.kind === "whole";
    if (input.dataset.lists && /[,-]/.test(text)) {  // a list or range: whole pieces, the server parses it
      var pieces = text.replace(/\s/g, "").split(/[,-]/);
      if (!whole || pieces.every(function (p) { return /^\d+$/.test(p); })) return null;
      return label + " must be whole numbers: one (4), a list (1,2,4) or a range (1-8); you typed '" + text + "'.";
    }
    // ASCII decimal only, as the server reads it (app/web/numbers.py): not "0x10", "1_000" or "٣"
    var n = DECIMAL.test(text) ? Number(text) : NaN;
    if (DECIMAL.test(text) && !isFinite(n)) return label + " must be a finite number; you typed '" + text + "'.";
    if (text === "" || !isFinite(n)) return label + " must be " + (whole ? WHOLE_WORDS : DECIMAL_WORDS) + "; you typed '" + text + "'.";
    if (whole && n !== Math.floor(n)) return label + " must be a whole number; you typed '" + text + "'.";
    var lo = input.dataset.min, hi = input.dataset.max;
    if ((lo !== undefined && n < Number(lo)) || (hi !== undefined && n > Number(hi))) {
      return label + " must be " + (hi !== undefined ? "between " + fmt(lo || 0) + " and " + fmt(hi) : "at least " + fmt(lo)) + ".";
    }
    return null;
  }

  function check(form) {
    var errors = {};
    var hf = form.querySelector("#model_source_hf");
    if (hf && hf.checked) { if (!value(form, "hf_config")) errors.hf_config = "Paste the model's config.json (or pick a catalog model)."; }
    else if (!value(form, "model")) errors.model = "Choose a model.";
    if (!value(form, "cluster") && !value(form, "gpu")) errors.gpu = "Choose a GPU type (or a cluster).";
    var question = value(form, "question");
    form.querySelectorAll("input[data-label]").forEach(function (input) {
      if (input.disabled) return;
      var name = input.name, text = input.value.trim();
      if (!text) {
        var required = input.dataset.required;
        if (!required) return;
        if (name === "num_gpus" && value(form, "num_nodes")) return;
        if (name === "global_batch_size" && question && question !== "best") return;
        errors[name] = required;
        return;
      }
      var bad = numberError(input);
      if (bad) errors[name] = bad;
    });
    var gpus = Number(value(form, "num_gpus")), nodes = Number(value(form, "num_nodes"));
    var perNode = value(form, "cluster") ? 0 : Number(value(form, "gpus_per_node"));
    if (errors.gpus_per_node) perNode = 0;  // a bad node size is said once, beside its own field
    if (!errors.num_gpus && !errors.num_nodes && gpus && nodes && perNode && gpus !== nodes * perNode) {
      errors.num_gpus = errors.num_nodes = fmt(gpus) + " GPUs is not " + fmt(nodes) + " nodes of " + fmt(perNode) + ": give one of the two, or make them agree.";
    } else if (!errors.num_gpus && gpus && perNode && !nodes && gpus > perNode && gpus % perNode) {
      errors.num_gpus = fmt(gpus) + " GPUs do not fill whole nodes of " + fmt(perNode) + ": use a multiple of GPUs per node.";
    }
    return errors;
  }

  function show(form, errors) {
    form.querySelectorAll(".field-error").forEach(function (p) {
      var name = p.id.replace(/-error$/, "");
      var el = form.elements[name];
      var field = p.closest(".field");
      var message = errors[name];
      p.textContent = message || "";
      p.hidden = !message;
      if (field) field.classList.toggle("has-error", !!message);
      if (el && el.setAttribute) {
        if (message) { el.setAttribute("aria-invalid", "true"); el.setAttribute("aria-describedby", p.id); }
        else el.removeAttribute("aria-invalid");
      }
    });
    var names = Object.keys(errors);
    var summary = form.querySelector("#error-summary");
    if (summary) {
      summary.hidden = !names.length;
      summary.textContent = names.length ? names.length + (names.length > 1 ? " fields to fix: see the messages beside them." : " field to fix: see the message beside it.") : "";
    }
    if (names.length) {
      var advanced = form.querySelector("details.advanced");
      var first = form.elements[names[0]];
      if (advanced && first && advanced.contains(first)) advanced.open = true;
      if (first && first.focus) first.focus();
    }
  }

  function syncCluster(form) {
    var cluster = form.querySelector("#cluster");
    if (!cluster) return;
    ["gpu", "gpus_per_node"].forEach(function (name) {
      var el = form.elements[name];
      if (el) el.disabled = !!cluster.value;
    });
  }

  // capture phase: runs before htmx's own submit handler on the form, so a bad form never posts
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form || form.id !== "plan-form") return;
    var errors = check(form);
    show(form, errors);
    if (Object.keys(errors).length) { event.preventDefault(); event.stopPropagation(); }
  }, true);

  // the pages' other forms post and load a page: a second click (or Enter) before it loads
  // would post again (a second batch, the same runs stored twice), so only the first goes
  // a file over the server's limit would be cut off mid-upload and answered with a bare 413:
  // said beside its field before it is sent
  function tooBig(input) {
    var file = input.files && input.files[0], max = Number(input.dataset.maxBytes);
    if (!file || !(file.size > max)) return null;
    var mib = function (n) { return (n / 1048576).toFixed(1) + " MiB"; };
    return file.name + " is " + mib(file.size) + "; this form takes files of at most " + mib(max) + ": split it into smaller files and send them one by one.";
  }
  function showTooBig(input, message) {
    var id = input.id + "-size-error", p = document.getElementById(id);
    if (!p) {
      p = document.createElement("p");
      p.className = "field-error"; p.id = id; p.setAttribute("role", "alert");
      input.insertAdjacentElement("afterend", p);
    }
    p.textContent = message;
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", id);
    input.focus();
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form || form.id === "plan-form" || event.defaultPrevented) return;
    var inputs = form.querySelectorAll("input[type=file][data-max-bytes]");
    for (var i = 0; i < inputs.length; i++) {
      var message = tooBig(inputs[i]);
      if (message) { event.preventDefault(); showTooBig(inputs[i], message); return; }
    }
    if (form.dataset.sent) { event.preventDefault(); return; }
    form.dataset.sent = "1";
    // a load the user stopped (Esc) must not leave the form dead: it sends again after 15 s
    setTimeout(function () { delete form.dataset.sent; }, 15000);
  });
  window.addEventListener("pageshow", function () {  // "back" to a page kept in the cache
    document.querySelectorAll("form[data-sent]").forEach(function (f) { delete f.dataset.sent; });
  });

  document.addEventListener("change", function (event) {
    if (event.target && event.target.id === "cluster") syncCluster(event.target.form);
    if (event.target && event.target.id === "model") pickSource("catalog");
    if (event.target && event.target.id === "hf_config_file") loadConfig(event.target);
  });

  // Both model inputs are always shown: a config pasted while "From the catalog" stayed
  // ticked planned the catalog model without a word. Using one of them now picks its source.
  function pickSource(source) {
    var radio = document.getElementById(source === "catalog" ? "model_source_catalog" : "model_source_hf");
    if (radio) radio.checked = true;
  }
  document.addEventListener("input", function (event) {
    if (event.target && event.target.id === "hf_config" && event.target.value.trim()) pickSource("hf_config");
  });

  // A config.json on disk is read into the text box (the file itself is never sent: the
  // input has no name), where the user sees it and the server checks it as pasted text.
  var CONFIG_MAX_BYTES = 1048576;
  function loadConfig(input) {
    var file = input.files && input.files[0], status = document.getElementById("hf_config_file-status");
    var box = document.getElementById("hf_config");
    if (!file || !box) return;
    if (file.size > CONFIG_MAX_BYTES) {
      say(status, file.name + " is " + (file.size / 1048576).toFixed(1) + " MiB: a config.json is a few KiB; pick the model's config.json.", true);
      return;
    }
    var reader = new FileReader();
    reader.onload = function () {
      box.value = String(reader.result || "");
      pickSource("hf_config");
      say(status, "Loaded " + file.name + " (" + fmt(file.size) + " bytes) into config.json above.", false);
    };
    reader.onerror = function () { say(status, "Could not read " + file.name + ": pick the file again, or paste its text.", true); };
    reader.readAsText(file);
  }
  function say(status, text, bad) {
    if (!status) return;
    status.textContent = text;
    status.className = bad ? "hint load-error" : "hint";
    status.hidden = false;
  }

  // errors the server found (a page without script's checks, or a rule only the planner knows)
  // come back in the swapped form: focus moves to the first, as it does for the page's own
  function focusFirstError(form) {
    var first = form.querySelector("[aria-invalid='true']");
    if (!first) return;
    for (var box = first.closest("details"); box; box = box.parentElement.closest("details")) box.open = true;
    first.focus();
  }

  // htmx keeps the page's markup for the back button, and typed values live in properties, not
  // attributes: written into the markup first, "back" shows the form as it was sent
  function keepTypedValues() {
    var form = document.getElementById("plan-form");
    if (!form) return;
    form.querySelectorAll("input, select, textarea").forEach(function (el) {
      if (el.type === "checkbox" || el.type === "radio") el.toggleAttribute("checked", el.checked);
      else if (el.tagName === "SELECT") Array.prototype.forEach.call(el.options, function (o) { o.toggleAttribute("selected", o.selected); });
      else if (el.tagName === "TEXTAREA") el.textContent = el.value;
      else if (el.type !== "file") el.setAttribute("value", el.value);
    });
  }
  document.addEventListener("htmx:beforeHistorySave", keepTypedValues);

  function init() {
    var form = document.getElementById("plan-form");
    if (form) { syncCluster(form); focusFirstError(form); }
    var loader = document.getElementById("hf_config_loader");
    if (loader) loader.hidden = false;  // reading a file needs this script
  }
  document.addEventListener("DOMContentLoaded", function () {
    init();
    // the other pages' forms (calibration, batch, catalog) come back from the server with their
    // errors: focus goes to the first field in error, unless the page put it somewhere itself
    var main = document.getElementById("main");
    if (main && !document.getElementById("plan-form") && document.activeElement === document.body) focusFirstError(main);
    if (window.htmx) window.htmx.onLoad(init);
  });
})();
