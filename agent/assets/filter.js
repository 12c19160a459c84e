// SPDX-License-Identifier: Apache-2.0
// The list pages' filter: hides the rows (tr.t) whose text does not hold
// the filter's text (#q) or whose data-health is not the one chosen (#h).
// Both are also read from ?q= and ?health=, so a filtered view can be
// linked. The pages read the same without it: every row is shown.
(function () {
  var q = document.getElementById('q'), h = document.getElementById('h');
  function f() {
    var t = q.value.toLowerCase(), w = h.value;
    document.querySelectorAll('tr.t').forEach(function (r) {
      var ok = (!t || r.textContent.toLowerCase().indexOf(t) >= 0) && (!w || r.dataset.health == w);
      r.style.display = ok ? '' : 'none';
    });
  }
  var u = new URLSearchParams(location.search);
  q.value = u.get('q') || '';
  h.value = u.get('health') || '';
  q.addEventListener('input', f);
  h.addEventListener('change', f);
  f();
})();
