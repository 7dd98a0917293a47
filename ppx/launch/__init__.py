"""Starting ranks beyond one machine: torchrun workers and the c10d store between them."""
