"""Tiny Llama-style decoder: random weights from a seed, stage slicing, TP sharding."""
