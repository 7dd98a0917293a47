# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Compare runs across policies
#
# Loads every run under `runs_root` (a study's `runs/` dir, a `python -m ppx.run -m`
# sweep dir, or any folder of run dirs), shows which cells were served or failed, and
# compares throughput, latency, voids and flips per group.
#
# Set the parameters below (or inject them with papermill / the test harness).

# %% tags=["parameters"]
runs_root = "../outputs/studies/ordering_matrix/latest/runs"
out_dir = None  # a folder to also write the figures (PNG) and tables (CSV) into
rows = ["admission", "guard"]  # verdict-grid rows
cols = "ordering"  # verdict-grid columns
by = ["admission", "guard", "ordering"]  # grouping for tables and bars
# Override keys to add as columns, so knobs that are not config choices can be used in
# rows/cols/by, e.g. ["faults.pool.tokens", "engine.admission.on_refusal"].
override_keys = []

# %%
# %matplotlib inline
# ruff: noqa: B018  (cells end in a bare expression: that is how Jupyter shows it)
try:
    import ppx.analysis as pa
except ModuleNotFoundError:  # a checkout without `pip install -e .`: use the repo root
    import sys

    sys.path.insert(0, "..")
    import ppx.analysis as pa

runs = pa.with_overrides(pa.load_runs(runs_root), override_keys)
pa.save_table(runs.drop(columns=["overrides"]), out_dir, "runs")
print(f"{len(runs)} runs under {runs_root}")
shown = [*dict.fromkeys([*by, *override_keys])]
runs[["run_id", *shown, "verdict", "out_tok_s", "ttft_ms_p50", "voids", "flips", "retractions"]]

# %% [markdown]
# ## Verdict per cell
# Each cell is split by the verdicts of its runs; the number is the mean of `voids`.

# %%
fig = pa.plot_verdict_grid(runs, rows=rows, cols=cols, value="voids")
pa.save_figure(fig, out_dir, "verdict_grid")

# %% [markdown]
# ## Side-by-side numbers
# `compare` is tidy (one row per group x metric, with per-verdict run counts);
# `wide` pivots it to one row per group.

# %%
metrics = ["out_tok_s", "ttft_ms_p50", "itl_ms_p50", "voids", "flips", "retractions"]
table = pa.compare(runs, by=by, metrics=metrics)
pa.save_table(table, out_dir, "compare")
pa.wide(table)

# %%
pa.verdict_counts(runs, by=by)

# %%
fig = pa.plot_bars(runs, by=by, metrics=["voids", "flips", "out_tok_s"])
pa.save_figure(fig, out_dir, "bars")

# %% [markdown]
# ## Latency distributions (served requests)

# %%
requests = pa.load_requests(runs)
fig = pa.plot_latency(requests, by=by)
pa.save_figure(fig, out_dir, "latency")

# %% [markdown]
# ## Runs that were not served
# Open one in `postmortem.ipynb` (set its `run_dir` to the path below).

# %%
failed = runs[runs["verdict"] != "served"][["run_dir", "verdict", "reason", "cycle"]]
pa.save_table(failed, out_dir, "failed")
failed
