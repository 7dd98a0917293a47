"""Supervisor side: workload generators, the request driver, token streams."""
