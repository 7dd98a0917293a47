"""Counters, events, the run store, the W&B sink and the progress display."""
