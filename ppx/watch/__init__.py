"""Watchdog, blocked-on ledger reader, wait-for graph, stack capture, post-mortem."""
