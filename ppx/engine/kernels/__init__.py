"""Math kernels for the engine, selected through :func:`get_kernels`."""

from __future__ import annotations

from ppx.engine.kernels.registry import KERNEL_BACKENDS, Kernels, get_kernels

__all__ = ["KERNEL_BACKENDS", "Kernels", "get_kernels"]
