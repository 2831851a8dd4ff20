"""The baseline: the smallest honest Flask mutating webhook.

It parses the review, echoes the uid, and answers a fixed patch when the pod carries
`qos=latency-sensitive` (no patch otherwise), with no validation, policy, or diff. The benchmark
serves it with exactly the gunicorn settings `netqos-webhook serve` uses, so the ratio between
the two is what our own code costs on top of Flask, gunicorn and TLS.
"""

from __future__ import annotations

import base64
import json

from flask import Flask, jsonify, request

PATCH = base64.b64encode(
    json.dumps(
        [
            {
                "op": "add",
                "path": "/spec/affinity",
                "value": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 90,
                                "preference": {
                                    "matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]
                                },
                            },
                            {
                                "weight": 10,
                                "preference": {
                                    "matchExpressions": [{"key": "net", "operator": "NotIn", "values": ["low"]}]
                                },
                            },
                        ]
                    }
                },
            }
        ]
    ).encode()
).decode()

app = Flask(__name__)


@app.post("/mutate")
def mutate():
    review = request.get_json()
    req = review["request"]
    labels = ((req.get("object") or {}).get("metadata") or {}).get("labels") or {}
    response = {"uid": req["uid"], "allowed": True}
    if labels.get("qos") == "latency-sensitive":
        response["patchType"] = "JSONPatch"
        response["patch"] = PATCH
    return jsonify({"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response})


@app.get("/healthz")
@app.get("/readyz")
def ready():
    return "ok\n"
