"""The post-mortem page: `python -m ppx.postmortem RUN_DIR` writes RUN_DIR/postmortem.html,
one self-contained HTML file (no network, no external script) for a run that did not serve:
per-rank timeline, wait-for graph with its cycle, the first pass where the ranks diverged,
the Flight Recorder's missing ranks, the counters and the command that replays the run."""
