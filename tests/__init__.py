"""The netqos-webhook test suite, grouped by layer: unit, http, process, tools (see README)."""
