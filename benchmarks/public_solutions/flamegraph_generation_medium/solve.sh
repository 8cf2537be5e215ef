#!/bin/bash
# Build a flamegraph SVG (like Brendan Gregg's flamegraph.pl) from collapsed stacks.
cat > /tmp/make_flamegraph.py <<'PY'
import html

SRC = "/home/user/profiling/collapsed_stacks.txt"
OUT = "/tmp/flamegraph.svg"

# Merge stacks into a tree: node = {name, value (inclusive), children}
root = {"name": "all", "value": 0, "children": {}}
with open(SRC) as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        try:
            n = int(count)
        except ValueError:
            continue
        node = root
        node["value"] += n
        for frame in stack.split(";"):
            node = node["children"].setdefault(frame, {"name": frame, "value": 0, "children": {}})
            node["value"] += n

WIDTH = 1200
XPAD = 10
FRAME_H = 16
total = root["value"] or 1
scale = (WIDTH - 2 * XPAD) / total


def depth(node):
    return 1 + max((depth(c) for c in node["children"].values()), default=0)


max_depth = depth(root)
height = (max_depth + 3) * FRAME_H + 40
rects = []


def color(name):
    h = 0
    for ch in name:
        h = (h * 31 + ord(ch)) & 0xFFFF
    r = 205 + h % 50
    g = 60 + (h >> 4) % 140
    b = 40 + (h >> 8) % 40
    return f"rgb({r},{g},{b})"


def emit(node, x, level):
    w = node["value"] * scale
    y = height - 30 - (level + 1) * FRAME_H
    pct = 100.0 * node["value"] / total
    name = html.escape(node["name"])
    title = f"{name} ({node['value']} samples, {pct:.2f}%)"
    label = name if w > 7 * 3 else ""
    if label and len(label) * 7 > w:
        label = label[: max(int(w / 7) - 2, 0)] + ".."
    rects.append(
        f'<g class="frame"><title>{title}</title>'
        f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{FRAME_H - 1}" fill="{color(node["name"])}" rx="2" ry="2" '
        f'data-name="{name}" data-samples="{node["value"]}"/>'
        f'<text x="{x + 3:.2f}" y="{y + FRAME_H - 5}">{label}</text></g>'
    )
    cx = x
    for child in sorted(node["children"].values(), key=lambda c: c["name"]):
        emit(child, cx, level + 1)
        cx += child["value"] * scale


emit(root, XPAD, 0)

svg = f'''<?xml version="1.0" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg version="1.1" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">
<style type="text/css">
text {{ font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); pointer-events: none; }}
.frame:hover rect {{ stroke: black; stroke-width: 0.5; cursor: pointer; }}
</style>
<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="rgb(250,250,238)"/>
<text x="{WIDTH / 2}" y="24" text-anchor="middle" style="font-size:17px">Flame Graph</text>
{chr(10).join(rects)}
</svg>
'''
with open(OUT, "w") as f:
    f.write(svg)
print(f"wrote {OUT}: {len(rects)} frames, {total} samples")
PY
python3 /tmp/make_flamegraph.py
