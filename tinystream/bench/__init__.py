"""Benchmarks behind `tinystream bench ...` (storage, produce, consume)."""
