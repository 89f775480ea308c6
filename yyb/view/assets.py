"""The viewer's two static files: its stylesheet and the script behind the copy buttons.

They are served from the viewer itself (``/static/...``), so the pages need no inline style
or script and the Content-Security-Policy can refuse both (docs/view.md, "Headers").
"""

from __future__ import annotations

CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#1d1d1f;font-size:14px}
header{background:#24292f;padding:6px 16px}
header nav{display:flex;flex-wrap:wrap;gap:6px 16px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}
header form{display:flex;gap:4px;flex:0 1 26em;min-width:0;max-width:100%;margin-left:auto}
header input{flex:1 1 auto;width:22em;min-width:0;max-width:100%;box-sizing:border-box}
main{padding:8px 16px;max-width:1360px;overflow-wrap:anywhere}
footer{color:#666;padding:8px 16px;border-top:1px solid #ddd;font-size:12px;
overflow-wrap:anywhere}
h1{font-size:20px;margin:12px 0 4px}
h2{font-size:16px;margin:20px 0 6px;border-bottom:1px solid #ddd}
h3{font-size:14px;margin:14px 0 4px}
div.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;margin:6px 0;font-size:13px;overflow-wrap:normal}
td,th{border:1px solid #d0d7de;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa}
table.facts th{width:12em}
table.facts td{overflow-wrap:anywhere}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
pre.text{background:#f6f8fa;border:1px solid #d0d7de;padding:6px;max-height:32em;overflow:auto;
white-space:pre-wrap;word-break:break-all}
pre.json{margin:0;max-height:24em;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere}
dl.values{margin:0;display:grid;grid-template-columns:minmax(0,max-content) minmax(0,1fr);
gap:0 10px}
dl.values dt{color:#57606a}
dl.values dd{margin:0;overflow-wrap:anywhere}
p.bundled{color:#57606a;font-style:italic}
a.oid{text-decoration:none}
span.oid{white-space:nowrap}
button.copy{font-size:10px;padding:0 3px;margin-left:3px;cursor:pointer}
.badge{display:inline-block;border-radius:3px;padding:0 5px;font-size:12px;font-weight:600}
.ok{background:#dafbe1;color:#116329}
.bad{background:#ffebe9;color:#a40e26}
.warn{background:#fff8c5;color:#7d4e00}
.info{background:#ddf4ff;color:#0550ae}
.banner{padding:6px 10px;margin:8px 0;border:2px solid}
.banner.bad{border-color:#a40e26}
.banner.ok{border-color:#116329}
.diff{border:1px solid #d0d7de;margin:8px 0}
.diff h3{margin:0;padding:4px 6px;background:#f6f8fa;font-family:ui-monospace,monospace;
font-size:12px;word-break:break-all}
.diff pre{margin:0;padding:0;overflow-x:auto}
.diff span{display:block;padding:0 6px;white-space:pre-wrap;word-break:break-all}
.diff .add{background:#e6ffec}
.diff .del{background:#ffebe9}
.diff .hunk{background:#ddf4ff;color:#57606a}
.diff .meta{color:#57606a}
.matrix td{min-width:8em}
.chip{display:inline-block;margin:1px;padding:0 4px;border-radius:3px;text-decoration:none}
.pager{font-weight:600}
"""

# Copies an oid: the value is a data attribute the page wrote from a validated oid.
JS = """
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("button.copy").forEach(function (button) {
    button.addEventListener("click", function () {
      var text = button.getAttribute("data-copy");
      var done = function () { button.textContent = "copied"; };
      if (navigator.clipboard) {
        navigator.clipboard.writeText(text).then(done, function () {});
      }
    });
  });
});
"""

# The tab's icon: a browser asks for one whatever the page says, so the page names this one.
ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    '<rect width="16" height="16" rx="3" fill="#24292f"/>'
    '<path d="M4 8l3 3 5-6" stroke="#3fb950" stroke-width="2" fill="none"/></svg>'
)

FILES = {
    "view.css": ("text/css; charset=utf-8", CSS),
    "view.js": ("text/javascript; charset=utf-8", JS),
    "icon.svg": ("image/svg+xml", ICON),
}
