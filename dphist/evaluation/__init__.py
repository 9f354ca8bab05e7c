"""Measuring accuracy: workloads and error metrics, the expected error a report states, comparing algorithms on a steward's table, the benchmark."""
