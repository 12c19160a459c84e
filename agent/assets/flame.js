// SPDX-License-Identifier: Apache-2.0
// The profile page's flame graphs (.fg), drawn by the server as nested
// boxes (.fn: a name span, then its children's row .fc), brought to life:
// a click on a frame zooms into it (its ancestors' other children are
// hidden, so it spans the width; the browser's Back, Escape, the top frame
// or "reset zoom" go back out), the search box marks the frames whose name
// matches (text, or /regexp/) and shows their share of the whole, and the
// orientation links switch between icicle and flame without a reload.
// Values are read from the page (a frame's width is its value), names as
// text (never as HTML); nothing is fetched.
(function () {
  'use strict';
  var graphs = Array.prototype.slice.call(document.querySelectorAll('.fg'));
  if (!graphs.length) return;

  // A value in its unit, as the server writes it (agent/ui_fmt.c).
  function three(v, unit) {
    var d = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;
    return v.toFixed(d) + ' ' + unit;
  }
  function count(v) {
    var s = String(v), out = '';
    for (var i = 0; i < s.length; i++) {
      if (i && (s.length - i) % 3 === 0) out += ',';
      out += s[i];
    }
    return out;
  }
  function fmt(v, unit) {
    var neg = v < 0, m = Math.abs(v), s;
    if (unit === 'nanoseconds') {
      if (m < 1e3) s = m + ' ns';
      else if (m < 999.5e3) s = three(m / 1e3, '\u00b5s');
      else if (m < 999.5e6) s = three(m / 1e6, 'ms');
      else if (m < 59.95e9) s = three(m / 1e9, 's');
      else if (m < 59.95 * 60e9) s = three(m / 60e9, 'min');
      else s = three(m / 3600e9, 'h');
    } else if (unit === 'bytes') {
      if (m < 1024) s = m + ' B';
      else {
        var units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'], u = -1, d = m;
        while (d >= 1023.5 && u < 5) { d /= 1024; u++; }
        s = three(d, units[u]);
      }
    } else s = count(m);
    return (neg ? '-' : '') + s;
  }
  function pct(part, whole) {
    var p = whole ? 100 * part / whole : 0;
    if (part && whole && p > -0.005 && p < 0.005) return part > 0 ? '<0.01%' : '>-0.01%';
    return p.toFixed(2) + '%';
  }

  // A frame's value: its width (the flex of its style, exact as written),
  // less the baseline's part in a diff.
  function value(fn) {
    var m = /flex:(-?\d+)/.exec(fn.getAttribute('style') || '');
    var v = m ? Number(m[1]) : 0;
    var b = fn.getAttribute('data-b');
    return b === null ? v : v - Number(b);
  }
  function nameOf(fn) {
    var t = fn.getAttribute('title') || '';
    var nl = t.indexOf('\n');
    return nl < 0 ? t : t.slice(0, nl);
  }
  function frames(g) { return g.querySelectorAll('.fn'); }

  // Zoom: hide the other children of the frame and of each ancestor.
  function unzoom(g) {
    g.querySelectorAll('.z').forEach(function (e) { e.classList.remove('z'); });
    g.classList.remove('zoomed');
  }
  function zoom(g, fn) {
    unzoom(g);
    if (fn === g.querySelector('.fn')) return;
    for (var n = fn; n && n.classList.contains('fn'); n = n.parentElement.parentElement) {
      var row = n.parentElement;
      if (!row.classList.contains('fc')) break;
      Array.prototype.forEach.call(row.children, function (s) {
        if (s !== n) s.classList.add('z');
      });
    }
    g.classList.add('zoomed');
  }
  function apply(state) {
    graphs.forEach(function (g, gi) {
      if (state && state.g === gi) zoom(g, frames(g)[state.i]);
      else unzoom(g);
    });
  }
  graphs.forEach(function (g, gi) {
    g.addEventListener('click', function (ev) {
      var fn = ev.target.closest('.fn');
      if (!fn || !g.contains(fn) || ev.target.tagName !== 'SPAN') return;
      var i = Array.prototype.indexOf.call(frames(g), fn);
      var state = i === 0 ? null : { g: gi, i: i };
      history.pushState(state, '', state ? '#zoom=' + gi + '.' + i : location.pathname + location.search);
      apply(state);
    });
  });
  window.addEventListener('popstate', function (ev) { apply(ev.state); });
  document.addEventListener('keydown', function (ev) {
    if (ev.key === 'Escape' && document.querySelector('.fg.zoomed')) {
      history.pushState(null, '', location.pathname + location.search);
      apply(null);
    }
  });
  var m = /^#zoom=(\d+)\.(\d+)$/.exec(location.hash);
  if (m) apply({ g: Number(m[1]), i: Number(m[2]) });

  // Search: mark the matching frames, and sum the outermost ones.
  var js = document.querySelector('.fgbar .js');
  var box = document.getElementById('search'), out = document.getElementById('share');
  var reset = document.getElementById('unzoom');
  if (js) js.hidden = false;
  if (reset) reset.addEventListener('click', function () {
    history.pushState(null, '', location.pathname + location.search);
    apply(null);
  });
  function matcher(q) {
    var re = /^\/(.+)\/$/.exec(q);
    if (re) {
      try { var r = new RegExp(re[1], 'i'); return function (s) { return r.test(s); }; }
      catch (e) { return null; }
    }
    q = q.toLowerCase();
    return function (s) { return s.toLowerCase().indexOf(q) >= 0; };
  }
  function search() {
    var q = box.value, test = q ? matcher(q) : null, texts = [];
    graphs.forEach(function (g) {
      var all = frames(g), sum = 0, hits = 0;
      g.classList.toggle('searching', !!test);
      Array.prototype.forEach.call(all, function (fn, i) {
        var hit = !!test && i > 0 && test(nameOf(fn));
        fn.classList.toggle('m', hit);
      });
      if (!test) return;
      Array.prototype.forEach.call(g.querySelectorAll('.fn.m'), function (fn) {
        hits++;
        var up = fn.parentElement.closest('.fn');
        for (; up && g.contains(up); up = up.parentElement.closest('.fn'))
          if (up.classList.contains('m')) return;
        sum += value(fn);
      });
      var total = Number(g.getAttribute('data-total')), unit = g.getAttribute('data-unit');
      texts.push(hits + (hits === 1 ? ' frame matches: ' : ' frames match: ') + fmt(sum, unit) +
                 ' of ' + fmt(total, unit) + ' (' + pct(sum, total) + ')');
    });
    if (out) out.textContent = test ? texts.join('; ') : (q ? 'not a regular expression' : '');
  }
  if (box) box.addEventListener('input', search);

  // Orientation: the links still work; the script only spares the reload.
  var orient = document.querySelectorAll('.fgbar a.orient');
  orient.forEach(function (a) {
    var v = /[?&]view=flame/.test(a.getAttribute('href')) ? 'flame' : 'icicle';
    a.addEventListener('click', function (ev) {
      if (graphs.length > 1) return; // a sandwich keeps its two halves as they are
      ev.preventDefault();
      graphs[0].classList.toggle('flame', v === 'flame');
      graphs[0].classList.toggle('icicle', v !== 'flame');
      orient.forEach(function (o) { o.classList.toggle('cur', o === a); });
      history.replaceState(history.state, '', a.getAttribute('href') + location.hash);
    });
  });
})();
