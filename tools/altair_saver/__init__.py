"""altair_saver - the hook Altair 4 (Debian's python3-altair) calls to save
a chart as PNG or SVG: `chart.save("x.png")` imports altair_saver and calls
render(). The PyPI package is not in Debian, so this one hands the spec to
tools/vl2png.mjs (vega-lite, vega and resvg from npm, tests/node). Put tools/
on PYTHONPATH to use it."""
import os
import subprocess

_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vl2png.mjs")
_MIME = {"png": "image/png", "svg": "image/svg+xml"}


def render(spec, fmt, mode="vega-lite", scale_factor=None, **kwargs):
    if fmt not in _MIME:
        raise ValueError("altair_saver (spantrace): only png and svg, not %r" % fmt)
    import json
    out = subprocess.run(["node", _SCRIPT, fmt, str(scale_factor or 1)],
                         input=json.dumps(spec).encode(), capture_output=True, check=False)
    if out.returncode != 0:
        raise RuntimeError("vl2png failed: " + out.stderr.decode(errors="replace"))
    data = out.stdout if fmt == "png" else out.stdout.decode()
    return {_MIME[fmt]: data}
