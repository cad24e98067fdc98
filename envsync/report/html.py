"""The fleet as one self-contained HTML page: inline CSS and JS, nothing fetched.

Each cell shows the host's value coloured by severity, with the reason and the fixes a
click away; the rows sort by worst severity (the default) or by one host's severity
(click its column; `#sort=HOST` in the address does the same on load, and
`#open=fatal` opens every fatal cell).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from envsync.findings import Finding, Report, short_hash
from envsync.report.fleet import Fleet, build_fleet, cell_text
from envsync.vocab import SEVERITIES, SEVERITY_RANK

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
p.sub{margin:0 0 16px;color:#5a6372}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 3px #0002}
th,td{border:1px solid #dde1e7;padding:6px 8px;vertical-align:top;text-align:left}
th{background:#eef1f5;position:sticky;top:0;cursor:pointer;user-select:none;white-space:nowrap}
th .counts{display:block;font-weight:normal;font-size:12px;color:#5a6372}
th.sorted{background:#dfe6f0}
td.subject{font-family:ui-monospace,Menlo,monospace;font-size:13px;max-width:360px;
word-break:break-all}
td.kind,td.ref{color:#5a6372;font-size:13px}
td.ref{font-family:ui-monospace,Menlo,monospace}
td.same{color:#9aa3b0;text-align:center}
.sev{display:inline-block;font-size:11px;font-weight:600;border-radius:3px;padding:0 5px;
margin-right:6px;color:#fff}
details summary{cursor:pointer;font-family:ui-monospace,Menlo,monospace;font-size:13px}
details .why{margin:6px 0 2px;max-width:340px}
details ul{margin:2px 0 0 18px;padding:0;max-width:340px}
details li{color:#1b5e20}
.legend span{margin-right:10px}
.notes{margin-top:16px;color:#5a6372;font-size:13px}
"""

JS = """
(function(){
  var table=document.getElementById('fleet');
  var body=table.tBodies[0];
  function rank(row,col){var c=row.cells[col];return parseInt(c.getAttribute('data-rank'),10);}
  function sortBy(col){
    var rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){
      return rank(a,col)-rank(b,col)||rank(a,3)-rank(b,3)||
        a.getAttribute('data-order')-b.getAttribute('data-order');});
    rows.forEach(function(r){body.appendChild(r);});
    Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){
      th.classList.toggle('sorted',i===col);});
    table.setAttribute('data-sorted',table.tHead.rows[0].cells[col].getAttribute('data-key'));
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){
    if(th.hasAttribute('data-key')){th.addEventListener('click',function(){sortBy(i);});}
  });
  var o=/open=([a-z]+)/.exec(location.hash);
  if(o){Array.prototype.forEach.call(body.querySelectorAll('td.'+o[1]+' details'),
    function(d){d.open=true;});}
  var m=/sort=([^&]+)/.exec(location.hash);
  if(m){var key=decodeURIComponent(m[1]);
    Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th,i){
      if(th.getAttribute('data-key')===key){sortBy(i);}});}
})();
"""

_SAME_RANK = len(SEVERITIES)  # a host that matches sorts after every finding


def _cell(host: str, finding: Finding | None) -> str:
    if finding is None:
        return f'<td class="same" data-host="{escape(host)}" data-rank="{_SAME_RANK}">=</td>'
    fixes = "".join(f"<li>{escape(x.kind)}: {escape(x.summary)}</li>" for x in finding.fixes)
    return (
        f'<td class="{finding.severity}" data-host="{escape(host)}" '
        f'data-rank="{SEVERITY_RANK[finding.severity]}" title="{escape(finding.reason)}">'
        f'<details><summary><span class="sev {finding.severity}">{finding.severity}</span>'
        f"{escape(cell_text(finding))}</summary>"
        f'<div class="why">{escape(finding.reason)}</div>'
        + (f"<ul>{fixes}</ul>" if fixes else "")
        + "</details></td>"
    )


def render_fleet(fleet: Fleet) -> str:
    head = ["<th>subject</th>", "<th>kind</th>", "<th>reference</th>"]
    head.append('<th data-key="severity" class="sorted">worst</th>')
    for host in fleet.hosts:
        head.append(
            f'<th data-key="{escape(host)}">{escape(host)}'
            f'<span class="counts">{escape(fleet.counts_text(host))}</span></th>'
        )
    rows = []
    for order, row in enumerate(fleet.rows):
        cells = [
            f'<td class="subject" data-rank="{order}">{escape(row.subject)}</td>',
            f'<td class="kind" data-rank="0">{escape(row.kind)}</td>',
            f'<td class="ref" data-rank="0">{escape(short_hash(row.reference) or "—")}</td>',
            f'<td data-rank="{SEVERITY_RANK[row.worst]}">'
            f'<span class="sev {row.worst}">{row.worst}</span></td>',
        ]
        cells += [_cell(host, row.cells.get(host)) for host in fleet.hosts]
        rows.append(f'<tr data-order="{order}">{"".join(cells)}</tr>')
    notes = "".join(
        f"<li>{escape(host)}: {escape(note)}</li>"
        for host, items in fleet.notes.items()
        for note in items
    )
    legend = "".join(f'<span><span class="sev {s}">{s}</span></span>' for s in SEVERITIES)
    title = f"envsync: {len(fleet.hosts)} host(s) against {fleet.reference}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}{SEVERITY_CSS}</style></head><body>\n"
        f"<h1>{escape(title)}</h1>\n"
        f'<p class="sub">{len(fleet.rows)} difference(s) on any host; a cell is the '
        "host's value (<code>=</code>: as on the reference); click it for the reason and "
        f'the fixes, click a column to sort by it. <span class="legend">{legend}</span></p>\n'
        f'<table id="fleet" data-sorted="severity"><thead><tr>{"".join(head)}</tr></thead>'
        f"<tbody>\n{chr(10).join(rows)}\n</tbody></table>\n"
        + (f'<ul class="notes">{notes}</ul>\n' if notes else "")
        + f"<script>{JS}</script>\n</body></html>\n"
    )


def render(reports: Sequence[Report]) -> str:
    return render_fleet(build_fleet(reports))
