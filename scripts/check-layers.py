#!/usr/bin/python3
"""Checks the shape of user/ that docs/DESIGN's layers promise (issue 22):
the modules (user/<module>/) include one another without a cycle; nothing
includes cli/ but cli/; loader/ (libbpf's skeletons) is included only by
loader/ and cli/; and user/cli/, which only parses arguments and wires
parts together, stays at most 1500 lines. Exit status: 0 clean, 1 a
finding (one line each on stderr)."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "user")
CLI_MAX_LINES = 1500
INCLUDE = re.compile(r'\s*#\s*include\s+"([a-z_]+)/')

edges = {}
cli_lines = 0
for module in sorted(os.listdir(ROOT)):
    folder = os.path.join(ROOT, module)
    if not os.path.isdir(folder):
        continue
    edges.setdefault(module, set())
    for dirpath, _, files in os.walk(folder):
        for name in files:
            if not name.endswith((".h", ".cpp")):
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                lines = f.readlines()
            if module == "cli":
                cli_lines += len(lines)
            for line in lines:
                m = INCLUDE.match(line)
                if m and m.group(1) != module and os.path.isdir(os.path.join(ROOT, m.group(1))):
                    edges[module].add(m.group(1))

findings = []
for module, deps in sorted(edges.items()):
    if "cli" in deps:
        findings.append(f"{module}/ includes cli/")
    if "loader" in deps and module != "cli":
        findings.append(f"{module}/ includes loader/ (only cli/ may)")


def reaches(start, goal):
    seen, todo = set(), [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


for module, deps in sorted(edges.items()):
    for dep in sorted(deps):
        if module < dep and reaches(dep, module):
            findings.append(f"{module}/ and {dep}/ include each other (a cycle)")
if cli_lines > CLI_MAX_LINES:
    findings.append(f"user/cli/ is {cli_lines} lines (at most {CLI_MAX_LINES}: "
                    "it parses arguments and wires parts together)")
for f in findings:
    print(f"layers: {f}", file=sys.stderr)
sys.exit(1 if findings else 0)
