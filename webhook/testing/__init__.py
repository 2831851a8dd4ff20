"""Test harness shared by tests, scripts and benchmarks: real servers on loopback, no mocks."""
