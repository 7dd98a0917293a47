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
# # Phase flips over time
#
# Throughput of one run across its PP <-> TP flips, with each flip window shaded and the
# voids and retractions it caused; then the per-flip cost table. Give `run_dir`, or
# leave it `None` to take the run under `runs_root` with the most flips.

# %% tags=["parameters"]
run_dir = None
runs_root = "../outputs/studies/phase_flip/latest/runs"
out_dir = None  # a folder to also write the figures (PNG) and tables (CSV) into
window_s = 0.5  # events within this many seconds of a flip count towards it

# %%
# %matplotlib inline
# ruff: noqa: B018  (cells end in a bare expression: that is how Jupyter shows it)
try:
    import ppx.analysis as pa
except ModuleNotFoundError:  # a checkout without `pip install -e .`: use the repo root
    import sys

    sys.path.insert(0, "..")
    import ppx.analysis as pa

runs = pa.load_runs(runs_root if run_dir is None else run_dir)
if run_dir is None:
    run_dir = runs.sort_values("flips", ascending=False)["run_dir"].iloc[0]
row = pa.load_runs(run_dir).iloc[0]
print(
    f"run: {run_dir}\nverdict: {row['verdict']}  flips: {row['flips']}  "
    f"voids: {row['voids']}  retractions: {row['retractions']}  "
    f"cutover p50/max: {row['cutover_ms_p50']}/{row['cutover_ms_max']} ms"
)

# %%
fig = pa.plot_flip_timeline(run_dir)
pa.save_figure(fig, out_dir, "flip_timeline")

# %% [markdown]
# ## Cost of each flip

# %%
impact = pa.flip_impact(run_dir, window_s=window_s)
pa.save_table(impact, out_dir, "flip_impact")
impact

# %% [markdown]
# ## Flip configurations side by side (every run under `runs_root`)

# %%
if runs["flip"].nunique() > 1:
    fig = pa.plot_bars(runs, by="flip", metrics=["out_tok_s", "voids", "retractions"])
    pa.save_figure(fig, out_dir, "flip_bars")
pa.wide(
    pa.compare(runs, by="flip", metrics=["out_tok_s", "voids", "retractions", "cutover_ms_p50"])
)
