"""Launching and ending ranks: torchrun workers and the c10d store between them (beyond one
machine), and the end of every child process a run started (children.py)."""
