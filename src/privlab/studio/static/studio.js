// privlab studio: the only script. It follows a synthetic-data job's progress; every page
// works without it (the job page has a Refresh link).
(function () {
  document.documentElement.classList.add("js");
  var job = document.getElementById("job");
  if (!job) return;
  var state = job.getAttribute("data-state");
  var live = {queued: 1, starting: 1, running: 1};
  if (!live[state]) return;
  var url = job.getAttribute("data-status-url");
  function poll() {
    fetch(url, {credentials: "same-origin"}).then(function (r) { return r.json(); })
      .then(function (s) {
        document.getElementById("job-stage").textContent = s.stage;
        document.getElementById("job-state").textContent = s.state;
        var bar = document.getElementById("job-progress");
        bar.max = s.total; bar.value = s.done;
        // reload once it ends, or leaves the queue (the page then offers what it has)
        if (live[s.state] && (s.state === "queued") === (state === "queued")) {
          setTimeout(poll, 700);
        } else { window.location.reload(); }
      }).catch(function () { setTimeout(poll, 2000); });
  }
  setTimeout(poll, 500);
})();
