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
# # Post-mortem of a failed run
#
# What each rank was blocked on when the watchdog fired: the wait-for cycle, the
# per-rank channel operations up to the stall, the last events and the stacks.
# Give `run_dir`, or leave it `None` to take the first run under `runs_root` that was
# not served.

# %% tags=["parameters"]
run_dir = None
runs_root = "../outputs/studies/ordering_matrix/latest/runs"
out_dir = None  # a folder to also write the figures (PNG) and tables (CSV) into
last_s = None  # zoom the ops timeline to the last N seconds before the stall

# %%
# %matplotlib inline
# ruff: noqa: B018  (cells end in a bare expression: that is how Jupyter shows it)
try:
    import ppx.analysis as pa
except ModuleNotFoundError:  # a checkout without `pip install -e .`: use the repo root
    import sys

    sys.path.insert(0, "..")
    import ppx.analysis as pa

if run_dir is None:
    runs = pa.load_runs(runs_root)
    failed = runs[runs["verdict"] != "served"]
    if failed.empty:
        raise SystemExit(f"every run under {runs_root} was served: nothing to post-mortem")
    run_dir = failed["run_dir"].iloc[0]
pm = pa.load_postmortem(run_dir)
print(f"run:     {run_dir}")
print(f"verdict: {pm.verdict}")
print(f"reason:  {pm.reason}")
print(f"cycle:   {pm.cycle}")

# %% [markdown]
# ## Wait-for graph
# An arrow `rank a -> rank b` means a is blocked on something only b can provide;
# the red edges are the cycle that makes the run a deadlock.

# %%
fig = pa.plot_waitfor(run_dir)
pa.save_figure(fig, out_dir, "waitfor")

# %%
cycle = pa.cycle_table(pm.cycle)
pa.save_table(cycle, out_dir, "cycle")
cycle

# %% [markdown]
# ## Channel operations up to the stall
# One lane per rank: passes on top, channel ops below; each rank's last operation is
# hatched — that is the call it never returned from.

# %%
fig = pa.plot_ops_timeline(run_dir, last_s=last_s)
pa.save_figure(fig, out_dir, "ops_timeline")

# %% [markdown]
# ## What each rank reported last

# %%
pm.blocked_on

# %%
pa.save_table(pm.last_events, out_dir, "last_events")
pm.last_events

# %%
for rank, stack in sorted(pm.stacks.items()):
    print(f"===== rank{rank} =====\n{stack}")

# %%
pm.ledger
