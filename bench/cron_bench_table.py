#!/usr/bin/env python3
"""Turns a cron_bench JSON result (--benchmark_out) into the markdown table of
bench/README.md and checks the targets: median next() <= 100 ns over the set,
worst next() <= 2 us (slowest row's chain mean, and slowest row's p99 single call),
every parse <= 1 us. Times are medians of the repetitions, wall-clock ("real")."""
import json
import statistics
import sys

NEXT_MEDIAN_NS, NEXT_WORST_NS, PARSE_NS = 100.0, 2000.0, 1000.0


def to_ns(b):
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
    return b["real_time"] * scale


def main(path):
    with open(path) as f:
        data = json.load(f)
    rows = {}  # label -> {"Next": ns, "Parse": ns}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") not in (None, "median"):
            continue
        kind, _, label = b["run_name"].partition("/")
        row = rows.setdefault(label, {})
        row[kind.replace("BM_", "")] = to_ns(b)
        for counter in ("p99_ns", "max_ns"):
            if counter in b:
                row[counter] = b[counter]
    ctx = data["context"]
    print(f"host: {ctx.get('host_name')}, {ctx.get('num_cpus')} CPUs @ {ctx.get('mhz_per_cpu')} MHz,"
          f" load avg {ctx.get('load_avg')}, {ctx.get('date')}\n")
    nan = float("nan")
    print("| label | next() ns (chain mean) | next() p99 ns | next() max ns | parse ns |")
    print("|---|---:|---:|---:|---:|")
    for label, r in rows.items():
        print(f"| {label} | {r.get('Next', nan):.1f} | {r.get('p99_ns', nan):.0f} |"
              f" {r.get('max_ns', nan):.0f} | {r.get('Parse', nan):.0f} |")
    nexts = [r["Next"] for r in rows.values() if "Next" in r]
    parses = [r["Parse"] for r in rows.values() if "Parse" in r]
    worst_next = max(rows, key=lambda k: rows[k].get("Next", 0))
    worst_parse = max(rows, key=lambda k: rows[k].get("Parse", 0))
    worst_p99 = max(rows, key=lambda k: rows[k].get("p99_ns", 0))
    checks = [
        ("median next() over the set", statistics.median(nexts), NEXT_MEDIAN_NS, ""),
        ("worst next()", max(nexts), NEXT_WORST_NS, worst_next),
        ("worst single next() call, p99", rows[worst_p99].get("p99_ns", nan), NEXT_WORST_NS,
         worst_p99),
        ("worst parse", max(parses), PARSE_NS, worst_parse),
    ]
    print()
    nan = float("nan")
    ok = True
    for name, value, target, where in checks:
        met = value <= target
        ok &= met
        print(f"- {name}: {value:.1f} ns (target <= {target:.0f} ns){' ' + where if where else ''}"
              f": {'met' if met else 'MISSED by %.1f ns' % (value - target)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
