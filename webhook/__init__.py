"""netqos-webhook: the NetQoS scheduling preference as a mutating admission webhook."""

__version__ = "0.1.0"
