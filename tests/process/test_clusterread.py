"""The one reading module: what RBAC hides (or a client too old to read) is unknown for every command,
never "none", read from the fake API server."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import kubeapi
from webhook import cluster, status
from webhook.admission_policy import admission_policies as generate
from webhook.commands import clusterread
from webhook.commands.flags import ClusterArgs
from webhook.policy_file import default_policy

TOO_OLD = "(this kubernetes client predates their API: upgrade it)"


@pytest.mark.parametrize(
    ("forbidden", "client_predates", "policies", "bindings"),
    [
        pytest.param(set(), False, 1, 1, id="readable"),
        pytest.param({"mutatingadmissionpolicies"}, False, "the MutatingAdmissionPolicies", 1, id="policies-forbidden"),
        pytest.param(
            {"mutatingadmissionpolicybindings"},
            False,
            1,
            "the MutatingAdmissionPolicyBindings",
            id="bindings-forbidden",
        ),
        pytest.param(set(), True, f"the MutatingAdmissionPolicies {TOO_OLD}", 1, id="client-predates-the-api"),
    ],
)
def test_admission_policies_hidden_from_the_reader_are_unknown_to_status_and_rebalance_alike(
    forbidden: set[str],
    client_predates: bool,
    policies: int | str,
    bindings: int | str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`status` reports an Unknown; `rebalance` reads the registration, which names it unreadable."""
    if client_predates:  # a kubernetes client < 36 has no method for the kind
        _, read, _, scoped, plural = cluster._READ["MutatingAdmissionPolicy"]
        for kind in ("MutatingAdmissionPolicy", cluster.BETA_MUTATING_ADMISSION_POLICY):
            monkeypatch.setitem(cluster._READ, kind, ("CoreV1Api", read, "list_absent", scoped, plural))
    objects = [o for o in generate(default_policy()) if o["kind"].startswith("MutatingAdmissionPolicy")]
    snapshot = kubeapi.Snapshot(forbidden=forbidden).add_all(objects)
    with kubeapi.serve(snapshot, tmp_path) as api, clusterread.reader(ClusterArgs(str(api.kubeconfig))) as reader:
        found = clusterread.admission_policies(reader)
        live = clusterread.read_registration(reader)

    def seen(listed: clusterread.Listed) -> int | str:
        return listed.what if isinstance(listed, status.Unknown) else len(listed)

    assert (seen(found.policies), seen(found.bindings)) == (policies, bindings)
    unknown = [what for what in (policies, bindings) if isinstance(what, str)]
    assert list(live.unreadable) == unknown
    assert (len(live.admission_policies), len(live.bindings)) == tuple(
        0 if isinstance(n, str) else n for n in (policies, bindings)
    )
