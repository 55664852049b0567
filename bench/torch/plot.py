#!/usr/bin/env python3
"""Plots the CSV files of allreduce_bw.py and ddp_step.py (gyre vs gloo).

    /usr/bin/python3 bench/torch/plot.py --busbw busbw.csv --ddp ddp.csv -o torch_gyre_bench.png

Left: all_reduce busbw against message size, one line per backend and rank
count. Right: DDP step time per backend and rank count, beside the same step
under no_sync() (the compute alone). Needs matplotlib (Debian: python3-matplotlib,
which scripts/install-deps installs for bench/compare); without it this
says so and exits 1, the CSV files stay the record.
"""
import argparse
import csv
import sys


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def size_label(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return "%d %s" % (n // scale, unit)
    return "%d B" % n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--busbw", required=True, help="CSV of allreduce_bw.py --csv")
    ap.add_argument("--ddp", required=True, help="CSV of ddp_step.py --csv")
    ap.add_argument("-o", "--output", default="torch_gyre_bench.png", help=".png or .svg")
    opts = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display on CI machines
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("plot.py: matplotlib is not installed (%s); the CSV files hold the numbers" % e, file=sys.stderr)
        sys.exit(1)

    busbw, ddp = read(opts.busbw), read(opts.ddp)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    styles = {"gyre": "-", "gloo": "--"}
    for ranks in sorted({int(r["ranks"]) for r in busbw}):
        rows = sorted((r for r in busbw if int(r["ranks"]) == ranks), key=lambda r: int(r["bytes"]))
        sizes = [int(r["bytes"]) for r in rows]
        # Columns gyre_* and other_* (the other backend named by column
        # `other`; CSVs of older runs have gloo_* instead).
        for backend in ("gyre", "other"):
            column = backend if backend + "_busbw_gbs" in rows[0] else "gloo"
            name = rows[0].get("other", "gloo") if backend == "other" else "gyre"
            left.plot(sizes, [float(r[column + "_busbw_gbs"]) for r in rows], styles.get(name, ":"), marker="o",
                      markersize=3, label="%s, %d ranks" % (name, ranks))
    left.set_xscale("log", base=2)
    ticks = [s for s in sorted({int(r["bytes"]) for r in busbw})][::2]
    left.set_xticks(ticks)
    left.set_xticklabels([size_label(s) for s in ticks], rotation=45, ha="right")
    left.set_xlabel("message size (float32 sum)")
    left.set_ylabel("busbw (GB/s)")
    left.set_title("torch.distributed all_reduce, %s tensors" %
                   ("CUDA" if busbw and busbw[0].get("device") == "cuda" else "CPU"))
    left.grid(True, alpha=0.3)
    left.legend()

    labels = ["%s\n%s ranks" % (r["backend"], r["ranks"]) for r in ddp]
    xs = list(range(len(labels)))
    width = 0.38
    right.bar([x - width / 2 for x in xs], [float(r["step_s"]) * 1e3 for r in ddp], width, label="DDP step")
    right.bar([x + width / 2 for x in xs], [float(r["no_sync_step_s"]) * 1e3 for r in ddp], width,
              label="same step under no_sync() (no all-reduce)")
    right.set_xticks(xs)
    right.set_xticklabels(labels)
    right.set_ylabel("ms per step (median, slowest rank)")
    params = float(ddp[0]["params"]) / 1e6 if ddp else 0
    right.set_title("DDP step, %.0f M parameters" % params)
    right.legend()
    fig.tight_layout()
    fig.savefig(opts.output)
    print("wrote %s" % opts.output)


if __name__ == "__main__":
    main()
