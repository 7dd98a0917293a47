"""KV cache: pool + allocator, radix tree, host tier, ledger check."""
