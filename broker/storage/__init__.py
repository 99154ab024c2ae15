"""Partition log storage: segmented files by default, in memory for tests."""
