"""The serving process: the WSGI application, gunicorn wiring, TLS, policy reload, metrics, logs.

Imports the pure core (`webhook.admission`, `webhook.policy`, ...) and never the `kubernetes`
client or the command-line modules.
"""
