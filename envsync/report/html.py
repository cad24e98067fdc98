"""The fleet as one self-contained HTML page: inline CSS and JS, nothing fetched.

A row per class of hosts (their node set, count, worst severity and counts), each
difference a click away from its reason and fixes; the rows sort by any column (`#sort=KEY`
on load: hosts, count, worst, a severity), `#open=fatal` opens every fatal difference, and
a host's name (typed, or `#host=NAME`) shows the class it is in: at 1,000 hosts in 12
classes the page is 12 rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from envsync.model.findings import Finding, Report
from envsync.model.vocab import SEVERITIES
from envsync.report.base import View
from envsync.report.fleet import Fleet, FleetClass, build_fleet, change_text

# Each severity's cell background and badge colour (every severity has one: tested).
COLORS = {
    "fatal": ("#fde2e1", "#c62828"),
    "risky": ("#fff1d6", "#d98200"),
    "unknown": ("#e6e9f8", "#3949ab"),
    "degraded": ("#f3e5fb", "#8e44ad"),
    "benign": ("#eef1f5", "#8a94a3"),
}
SEVERITY_CSS = "".join(
    f"td.{s}{{background:{COLORS[s][0]}}}.sev.{s}{{background:{COLORS[s][1]}}}\n"
    for s in SEVERITIES
)
CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2330;
background:#fafbfc}
h1{font-size:20px;margin:0 0 4px}
p.sub{margin:0 0 12px;color:#5a6372}
#find{font:13px ui-monospace,Menlo,monospace;padding:4px 8px;width:280px;margin:0 0 12px}
#found{margin-left:8px;color:#5a6372;font-size:13px}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 3px #0002}
th,td{border:1px solid #dde1e7;padding:6px 8px;vertical-align:top;text-align:left}
th{background:#eef1f5;position:sticky;top:0;cursor:pointer;user-select:none;white-space:nowrap}
th.sorted{background:#dfe6f0}
td.hosts{font-family:ui-monospace,Menlo,monospace;font-size:13px;max-width:320px;
word-break:break-all}
td.count,td.n{text-align:right;font-variant-numeric:tabular-nums}
td.n.zero{color:#c0c6cf}
td.clean{color:#1b5e20}
.sev{display:inline-block;font-size:11px;font-weight:600;border-radius:3px;padding:0 5px;
margin-right:6px;color:#fff}
details{margin:0 0 4px}
details summary{cursor:pointer;font-family:ui-monospace,Menlo,monospace;font-size:13px}
details .why{margin:6px 0 2px;max-width:560px}
details ul{margin:2px 0 0 18px;padding:0;max-width:560px}
details li{color:#1b5e20}
.legend span{margin-right:10px}
.notes{margin-top:16px;color:#5a6372;font-size:13px}
"""

JS = """
(function(){
  var table=document.getElementById('fleet');
  var body=table.tBodies[0];
  var heads=table.tHead.rows[0].cells;
  function rank(row,col){return parseFloat(row.cells[col].getAttribute('data-rank'));}
  function sortBy(col){
    var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){
      return rank(a,col)-rank(b,col)||a.getAttribute('data-order')-b.getAttribute('data-order');});
    rows.forEach(function(r){body.appendChild(r);});
    Array.prototype.forEach.call(heads,function(th,i){th.classList.toggle('sorted',i===col);});
    table.setAttribute('data-sorted',heads[col].getAttribute('data-key'));
  }
  Array.prototype.forEach.call(heads,function(th,i){
    if(th.hasAttribute('data-key')){th.addEventListener('click',function(){sortBy(i);});}
  });
  var find=document.getElementById('find'),found=document.getElementById('found');
  function show(text){
    var word=text.trim(),shown=0,hosts=0;
    Array.prototype.forEach.call(body.rows,function(r){
      var members=r.getAttribute('data-hosts').split(' ');
      var hit=!word||members.some(function(m){return m.indexOf(word)>=0;});
      r.hidden=!hit;if(hit){shown++;}
    });
    found.textContent=word?shown+' class(es) with a host matching '+word:'';
  }
  find.addEventListener('input',function(){show(find.value);});
  var o=/open=([a-z]+)/.exec(location.hash);
  if(o){Array.prototype.forEach.call(body.querySelectorAll('details.'+o[1]),
    function(d){d.open=true;});}
  var m=/sort=([^&]+)/.exec(location.hash);
  if(m){var key=decodeURIComponent(m[1]);
    Array.prototype.forEach.call(heads,function(th,i){
      if(th.getAttribute('data-key')===key){sortBy(i);}});}
  var h=/host=([^&]+)/.exec(location.hash);
  if(h){find.value=decodeURIComponent(h[1]);show(find.value);}
})();
"""

_CLEAN_RANK = len(SEVERITIES)  # a class as the reference sorts after every finding


def _finding(finding: Finding) -> str:
    fixes = "".join(f"<li>{escape(x.kind)}: {escape(x.summary)}</li>" for x in finding.fixes)
    return (
        f'<details class="{finding.severity}"><summary>'
        f'<span class="sev {finding.severity}">{finding.severity}</span>'
        f"{escape(change_text(finding))}</summary>"
        f'<div class="why">{escape(finding.reason)}</div>'
        + (f"<ul>{fixes}</ul>" if fixes else "")
        + "</details>"
    )


def _row(order: int, by_name: int, row: FleetClass) -> str:
    counts = row.report.summary
    worst = (
        f'<td data-rank="{row.rank}"><span class="sev {row.worst}">{row.worst}</span></td>'
        if row.worst
        else f'<td class="clean" data-rank="{_CLEAN_RANK}">as the reference</td>'
    )
    cells = [
        f'<td class="hosts" data-rank="{by_name}" title="{escape(row.headline())}">'
        f"{escape(row.nodeset)}</td>",
        f'<td class="count" data-rank="{-row.count}">{row.count}</td>',
        worst,
    ]
    cells += [
        f'<td class="n{" zero" if not counts[s] else ""}" data-rank="{-counts[s]}">{counts[s]}</td>'
        for s in SEVERITIES
    ]
    cells.append(f'<td class="changes" data-rank="0">{"".join(map(_finding, row.findings))}</td>')
    members = escape(" ".join(row.hosts))
    return f'<tr data-order="{order}" data-hosts="{members}">{"".join(cells)}</tr>'


def render_fleet(fleet: Fleet, view: View) -> str:
    head = ['<th data-key="hosts">hosts</th>', '<th data-key="count">count</th>']
    head.append('<th data-key="worst" class="sorted">worst</th>')
    head += [f'<th data-key="{s}">{s}</th>' for s in SEVERITIES]
    head.append("<th>differences (click one for the reason and the fixes)</th>")
    by_name = {id(c): i for i, c in enumerate(sorted(fleet.classes, key=lambda c: c.nodeset))}
    rows = [_row(order, by_name[id(c)], c) for order, c in enumerate(fleet.classes)]
    notes = "".join(
        f"<li>{escape(nodeset)}: {escape(note)}</li>"
        for nodeset, items in fleet.notes.items()
        for note in items
    )
    legend = "".join(f'<span><span class="sev {s}">{s}</span></span>' for s in SEVERITIES)
    title = f"envsync: {fleet.title()}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}{SEVERITY_CSS}</style></head><body>\n"
        f"<h1>{escape(title)}</h1>\n"
        '<p class="sub">A row is a class: the hosts whose environments are identical, as a '
        "node set, compared once. Click a difference for its reason and fixes, a column to "
        f'sort by it; find a host\'s class by its name. <span class="legend">{legend}</span>'
        "</p>\n"
        '<input id="find" type="search" placeholder="a host, e.g. gpu042" '
        'aria-label="find a host"><span id="found"></span>\n'
        f'<table id="fleet" data-sorted="worst"><thead><tr>{"".join(head)}</tr></thead>'
        f"<tbody>\n{chr(10).join(rows)}\n</tbody></table>\n"
        + (f'<ul class="notes">{notes}</ul>\n' if notes else "")
        + f"<script>{JS}</script>\n</body></html>\n"
    )


def render(reports: Sequence[Report], view: View) -> str:
    return render_fleet(build_fleet(reports), view)
