"""One module per `netqos-webhook` command: typed arguments in, an exit code out.

No argparse here: `webhook.cli` parses the command line, builds the command's arguments and maps
`webhook.errors.NetqosError` to exit codes. A command module imports what it needs (gunicorn,
cryptography, the kubernetes client) inside its `run`, so `--help` for any command stays light.
"""
