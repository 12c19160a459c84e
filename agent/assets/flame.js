// SPDX-License-Identifier: Apache-2.0
// The profile page's flame graphs (.fg), drawn by the server as one flat
// list of frames (.fn) in depth-first order, each placed by its row (--d)
// and its left and width as percentages of the whole, brought to life: a
// click on a frame zooms into it (the frames' box is widened and shifted
// so that it spans the graph, its ancestors cut to the graph; the
// browser's Back, Escape, the top frame or "reset zoom" go back out), the
// search box marks the frames whose name matches (text, or /regexp/) and
// shows their share of the whole, and the orientation links switch
// between icicle and flame without a reload. Values come from the page (a
// frame's data-v, exact), names as text (never as HTML); nothing is
// fetched.
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

  // Each graph's frames, with their row, value, start and the end of
  // their subtree (an index), found from the depth-first order.
  function model(g) {
    var all = g.querySelectorAll('.fn'), fr = [], stack = [];
    for (var i = 0; i < all.length; i++) {
      var el = all[i], st = el.getAttribute('style') || '';
      var d = Number((/--d:(\d+)/.exec(st) || [0, 0])[1]);
      var v = Number(el.getAttribute('data-v') || 0), b = el.getAttribute('data-b');
      while (stack.length > d) fr[stack.pop()].end = i;
      var parent = d ? fr[stack[d - 1]] : null;
      var f = { el: el, d: d, v: v, own: b === null ? v : v - Number(b),
                start: parent ? parent.next : 0, next: 0, end: all.length,
                left: el.style.left, width: el.style.width };
      f.next = f.start;
      if (parent) parent.next += v;
      fr.push(f);
      stack.push(i);
    }
    return fr;
  }
  var models = graphs.map(model);
  function nameOf(el) {
    var t = el.getAttribute('title') || '';
    var nl = t.indexOf('\n');
    return nl < 0 ? t : t.slice(0, nl);
  }

  // Zoom: the frames' box widened and shifted so that the frame spans the
  // graph (its subtree with it; the rest falls outside and is clipped);
  // its ancestors, wider still, are cut to the graph so their names show.
  var zoomed = graphs.map(function () { return []; });
  function unzoom(gi) {
    var inner = graphs[gi].querySelector('.fgi');
    inner.style.width = '';
    inner.style.marginLeft = '';
    zoomed[gi].forEach(function (f) { f.el.style.left = f.left; f.el.style.width = f.width; });
    zoomed[gi] = [];
    graphs[gi].classList.remove('zoomed');
  }
  function zoom(gi, i) {
    var fr = models[gi], z = fr[i];
    unzoom(gi);
    if (!z || i === 0) return;
    var whole = fr[0].v, inner = graphs[gi].querySelector('.fgi');
    inner.style.width = (100 * whole / z.v) + '%';
    inner.style.marginLeft = (-100 * z.start / z.v) + '%';
    for (var j = i - 1, d = z.d; j >= 0 && d > 0; j--) {
      if (fr[j].d !== d - 1) continue;
      fr[j].el.style.left = z.el.style.left;
      fr[j].el.style.width = z.el.style.width;
      zoomed[gi].push(fr[j]);
      d--;
    }
    graphs[gi].classList.add('zoomed');
  }
  function apply(state) {
    graphs.forEach(function (g, gi) {
      if (state && state.g === gi) zoom(gi, state.i);
      else unzoom(gi);
    });
  }
  graphs.forEach(function (g, gi) {
    g.addEventListener('click', function (ev) {
      var el = ev.target.closest('.fn');
      if (!el || !g.contains(el)) return;
      var i = Array.prototype.indexOf.call(g.querySelectorAll('.fn'), el);
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
    graphs.forEach(function (g, gi) {
      var fr = models[gi], sum = 0, hits = 0, covered = 0;
      g.classList.toggle('searching', !!test);
      fr.forEach(function (f, i) {
        var hit = !!test && i > 0 && test(nameOf(f.el));
        f.el.classList.toggle('m', hit);
        if (!hit) return;
        hits++;
        if (i < covered) return; // inside a match already counted
        sum += f.own;
        covered = f.end;
      });
      if (!test) return;
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
