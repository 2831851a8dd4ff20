"""Where the stock kube-scheduler puts the pod we mutate, and where the NetQoS scheduler would
have put the pod as written. Pure: a policy, a pod, nodes and the pods on them in, an `Explanation` out.

The pod goes through `admission.review` exactly as a `/mutate` request would, and the JSON patch
in the response is applied to it: the scores are those of the patched pod, so they prove the
patch, not only the policy. Each node is then filtered and scored as kube-scheduler does
(`webhook.scheduler.cycle`), given the pods already on it, under the default profile or the one the
scheduler configuration gives the pod's schedulerName. The counterfactual is the same profile plus
the NetQoS plugin's Score (weight `netqos_weight`) for the pod without the injected terms.

`webhook.commands.explain` reads the files or the cluster and renders the report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch

from webhook import admission, apidata
from webhook.affinity import PREFERRED, REQUIRED, PreferredTerm, required_term_problems
from webhook.apidata import ShapeError
from webhook.errors import UsageError
from webhook.names import DEFAULT_NAMESPACE, DEFAULT_NETQOS_WEIGHT, INJECTED_ANNOTATION
from webhook.policy import Decision, Policy, Rule, injected, own_points, without_injected
from webhook.scheduler import cycle, read, sampling
from webhook.scheduler.config import not_evaluated_summary
from webhook.scheduler.cycle import Ranking
from webhook.scheduler.model import Node, NodeUsage, PodInfo, Profile, Target, cache_order, usage_by_node
from webhook.scheduler.plugins.netqos import NETQOS_TARGET, fast_target
from webhook.scheduler.read import NO_SELECTORS, Selectors
from webhook.scheduler.registry import (
    BALANCED_ALLOCATION,
    DEFAULT_PROFILE,
    IMAGE_LOCALITY,
    NETQOS,
    NODE_AFFINITY,
    POD_TOPOLOGY_SPREAD,
)
from webhook.scheduler.sampling import Landing
from webhook.scope import NOT_CALLED, not_called_reason
from webhook.scoretable import SchedulerWeights

# Owners whose selector PodTopologySpread's system default constraints spread by (kubernetes
# v1.36 pkg/scheduler/framework/plugins/helper/spread.go DefaultSelector).
SPREAD_OWNERS = ("ReplicaSet", "StatefulSet", "ReplicationController")
# What the API server keeps of a pod beside what was written: a pod that has any of these (or a
# status) was read from the cluster (`kubectl get pod -o yaml`, or `explain pod/NAME`).
SERVER_FIELDS = ("uid", "resourceVersion", "managedFields")


class ExplainError(UsageError, ValueError):
    """An input that cannot be explained; the message names the file, the field and the fix."""


def sentence(text: str) -> str:
    """`text` with its last sentence ended. Everything explain says to a person (its notes, the
    prose lines of its table, its errors) is whole sentences: a full stop closes each, as
    kube-scheduler's own "2/3 nodes are available: 1 Insufficient cpu." beside them does."""
    text = text.rstrip()
    return text if text.endswith((".", "?", "!")) else text + "."


@dataclass(frozen=True)
class Mutation:
    """What /mutate made of the pod."""

    pod: dict[str, Any]  # the pod with the response's patch applied
    decision: Decision
    injected: tuple[str, ...]  # rule names
    warnings: tuple[str, ...]
    patch: tuple[dict[str, Any], ...]
    not_called: str | None = None  # why the API server never calls the webhook for this pod

    @property
    def decision_name(self) -> str:
        return NOT_CALLED if self.not_called else self.decision.value


@dataclass(frozen=True)
class ImageSizes:
    """An image the pod uses that nodes report at different sizes. kube-scheduler's cache keeps
    one size per image name and ImageLocality scores every node holding it by that size
    (`imagelocality.image_states`): here `size`, that of `node`, the oldest node listing the image.
    `reported`: each size with the nodes reporting it, in cache order (the kept size first).
    `decides`: had the cache kept the smallest or the largest size reported instead (it adds
    nodes in an order explain can only guess), a prediction would name other nodes."""

    image: str
    size: int
    node: str
    reported: tuple[tuple[int, tuple[str, ...]], ...]
    decides: bool


@dataclass(frozen=True)
class Explanation:
    pod_name: str
    namespace: str
    mutation: Mutation
    added_terms: tuple[PreferredTerm, ...]  # preferred terms the patch appended
    added_terms_api: tuple[Any, ...]  # the same, as they appear in the patched pod
    ranking: Ranking  # the mutated pod under the profile: the stock scheduler
    netqos: Ranking  # the pod as written under the profile plus the NetQoS plugin
    netqos_weight: int
    not_evaluated: tuple[str, ...]
    notes: tuple[str, ...]
    image_sizes: tuple[ImageSizes, ...] = ()  # the pod's images that nodes report at different sizes
    # where one cycle binds the pod over the scheduler's rotating samples of 100 nodes or more
    # (`sampling.landing`), for the stock scheduler and the NetQoS scheduler's profile; `target`:
    # the policy's fast nodes, whose probability explain states
    landing: Landing | None = None
    netqos_landing: Landing | None = None
    target: Target = NETQOS_TARGET
    fast: tuple[str, ...] = ()  # the target's nodes, by name
    # what the --scheduler-config profile says that is not evaluated (`Profile.settings_not_evaluated`)
    settings_not_evaluated: tuple[str, ...] = ()

    def choices_match(self) -> bool:
        return set(self.ranking.affinity_choice) == set(self.ranking.netqos_choice)

    def predictions_match(self) -> bool:
        return set(self.ranking.predicted) == set(self.netqos.predicted)


def explain(
    policy: Policy,
    pod: dict[str, Any],
    nodes: Sequence[Node],
    pod_source: str = "pod",
    pods: Sequence[PodInfo] = (),
    profile: Profile = DEFAULT_PROFILE,
    netqos_weight: int = DEFAULT_NETQOS_WEIGHT,
    pods_given: bool = True,
    webhook_namespace: str = DEFAULT_NAMESPACE,
    selectors: Selectors = NO_SELECTORS,
    notes: Sequence[str] = (),
    usage: Mapping[str, NodeUsage] | None = None,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> Explanation:
    """The stock scheduler's view of the mutated pod, and the NetQoS scheduler's of the pod as
    written, on `nodes` with `pods` already running (those bound to a node and not finished), or,
    where `usage` is given, with what the pods on each node take already folded
    (`keys.UsageFold`, the pod itself left out): `pods` are then not read.
    A pod in a namespace the registration excludes (the webhook running in `webhook_namespace`)
    is never sent to the webhook: it is scheduled as written. `notes` come first (what the caller
    knows, such as the Kubernetes version scored as); every note is a sentence (`sentence`).
    `namespaces`: the namespaces' labels, which pod affinity's namespaceSelectors match (a
    namespace not there has its `kubernetes.io/metadata.name` label alone)."""
    pod, written = as_written(policy, pod)
    reason = not_called_reason(_namespace(pod), webhook_namespace)
    mutation = mutate(policy, pod) if reason is None else Mutation(pod, Decision.UNCHANGED, (), (), (), reason)
    try:
        before = read.pod_info(pod, selectors)
        after = read.pod_info(mutation.pod, selectors)
    except ShapeError as err:
        raise ExplainError(f"{pod_source}: {err}; fix the field (the API server would reject this pod)") from None
    if usage is None:
        usage = usage_by_node(p for p in pods if (p.namespace, p.name) != (after.namespace, after.name))
    netqos_profile = profile.with_plugin(NETQOS, netqos_weight)

    def rank_both(seen: Sequence[Node]) -> tuple[Ranking, Ranking]:
        return (
            cycle.rank(after, seen, usage, profile, namespaces=namespaces),
            cycle.rank(before, seen, usage, netqos_profile, namespaces=namespaces),
        )

    ranking, netqos = rank_both(nodes)
    landing = sampling.landing(after, nodes, usage, profile, namespaces, ranking=ranking)
    netqos_landing = sampling.landing(before, nodes, usage, netqos_profile, namespaces, ranking=netqos)
    target = fast_target(policy)
    fast = tuple(n.name for n in nodes if target.matches(n.labels))
    scored = after.images if IMAGE_LOCALITY in profile.weights else ()  # a profile may disable it
    image_sizes = image_size_disagreements(scored, nodes, (ranking, netqos), rank_both)
    added = after.preferred[len(before.preferred) :]  # the policy appends after the pod's own terms
    # The shapes were checked by pod_view above.
    spec = apidata.obj(mutation.pod, "spec", "spec")
    node_affinity = apidata.obj(apidata.obj(spec, "affinity", "spec.affinity"), "nodeAffinity", "nodeAffinity")
    added_api = tuple(apidata.items(node_affinity, PREFERRED, PREFERRED)[len(before.preferred) :])
    return Explanation(
        pod_name=before.name or _generate_name(pod) or "<unnamed>",
        namespace=_namespace(pod),
        mutation=mutation,
        added_terms=added,
        added_terms_api=added_api,
        ranking=ranking,
        netqos=netqos,
        netqos_weight=netqos_weight,
        not_evaluated=profile.not_evaluated,
        settings_not_evaluated=profile.settings_not_evaluated,
        notes=tuple(
            sentence(note)
            for note in (
                *written,
                *notes,
                *_policy_notes(policy, mutation, ranking, netqos, profile, netqos_weight, before.preferred),
                *_notes(after, ranking, nodes, profile, pods_given, image_sizes),
                *_sampling_notes(landing, netqos_landing, profile, target, fast),
            )
        ),
        image_sizes=image_sizes,
        landing=landing,
        netqos_landing=netqos_landing,
        target=target,
        fast=fast,
    )


def as_written(policy: Policy, pod: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`pod` as it was written, before admission and scheduling, and the notes that say what was
    taken away. A pod read from the cluster (it has a status or one of `SERVER_FIELDS`) loses
    those, and `spec.nodeName`: the scheduler judged it without them. The preferred terms of the
    rules its `netqos.io/injected` annotation names go, and the annotation (`policy.injected`):
    the webhook adds them again, and the NetQoS scheduler scored the pod without them. The pod's
    own terms stay. Copies only what it changes."""
    meta = pod.get("metadata")
    spec = pod.get("spec")
    removed: list[str] = []
    if isinstance(meta, dict) and isinstance(spec, dict) and ("status" in pod or any(k in meta for k in SERVER_FIELDS)):
        removed += [f"metadata.{k}" for k in SERVER_FIELDS if k in meta]
        removed += ["spec.nodeName"] if "nodeName" in spec else []
        removed += ["status"] if "status" in pod else []
        pod = {k: v for k, v in pod.items() if k != "status"}
        pod["metadata"] = {k: v for k, v in meta.items() if k not in SERVER_FIELDS}
        pod["spec"] = {k: v for k, v in spec.items() if k != "nodeName"}
    found = injected(policy, pod)
    pod = without_injected(pod, found)
    if found.terms:
        known = [name for name in found.rules if name not in found.unknown]
        rules = f"rule{'s' if len(known) > 1 else ''} {', '.join(known)}"
        removed.append(f"the {found.terms} preferred term(s) {rules} injected")
    if found.rules:
        removed.append(f"the annotation {INJECTED_ANNOTATION}")
    notes = []
    if removed:
        notes.append(f"explained as the pod was before admission and scheduling, without {_and(removed)}")
    if found.unknown:
        notes.append(
            f"{INJECTED_ANNOTATION} names {', '.join(found.unknown)}, which the policy has no rule of: the terms "
            "such a rule injected cannot be told from the pod's own and are kept"
        )
    return pod, tuple(notes)


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def image_size_disagreements(
    images: Sequence[str],
    nodes: Sequence[Node],
    rankings: tuple[Ranking, Ranking],
    rank_both: Callable[[Sequence[Node]], tuple[Ranking, Ranking]],
) -> tuple[ImageSizes, ...]:
    """The images of `images` that nodes report at different sizes (`ImageSizes`). `rankings`
    are the stock and NetQoS rankings over `nodes`; `rank_both` ranks both again over other
    nodes, to tell whether the size kept decides a prediction: ImageLocality grows with the size,
    so the smallest and the largest size reported bound what another cache order would give."""
    found = []
    for image in dict.fromkeys(images):
        holders = sorted((n for n in nodes if image in n.images), key=cache_order)
        by_size: dict[int, list[str]] = {}
        for node in holders:
            by_size.setdefault(node.images[image], []).append(node.name)
        if len(by_size) < 2:
            continue
        first = holders[0]
        kept = first.images[image]
        decides = any(
            _predictions(rank_both(_with_size(nodes, first, image, size))) != _predictions(rankings)
            for size in sorted({min(by_size), max(by_size)} - {kept})
        )
        reported = tuple((size, tuple(names)) for size, names in by_size.items())
        found.append(ImageSizes(image, kept, first.name, reported, decides))
    return tuple(found)


def _with_size(nodes: Sequence[Node], first: Node, image: str, size: int) -> list[Node]:
    """`nodes` with `first` (the node whose size the cache keeps) reporting `image` at `size`."""
    changed = dataclasses.replace(first, images={**first.images, image: size})
    return [changed if node is first else node for node in nodes]


def _predictions(rankings: tuple[Ranking, Ranking]) -> tuple[frozenset[str], frozenset[str]]:
    return frozenset(rankings[0].predicted), frozenset(rankings[1].predicted)


def mutate(policy: Policy, pod: dict[str, Any]) -> Mutation:
    """Send `pod` through `admission.review` as a CREATE, and apply the patch it answers."""
    review = admission.create_review(pod, "netqos-webhook-explain")
    result = admission.review(policy, review)
    patch = admission.wire_patch(result.response)
    patched = jsonpatch.apply_patch(pod, patch) if patch else pod
    warnings = tuple(result.response["response"].get("warnings") or ())
    return Mutation(patched, result.decision, result.injected, warnings, tuple(patch))


def _policy_notes(
    policy: Policy,
    mutation: Mutation,
    ranking: Ranking,
    netqos: Ranking,
    profile: Profile,
    netqos_weight: int,
    own: Sequence[PreferredTerm],
) -> tuple[str, ...]:
    """What the injected terms state, and whether this comparison weighs as they were compiled."""
    if mutation.decision is not Decision.MUTATED:
        return ()
    notes = []
    weights = policy.weights
    tabled = [r for r in policy.rules if r.name in mutation.injected and r.table is not None]
    own_max = own_points(policy, own)
    for rule in tabled:
        notes.append(_table_note(rule, weights, own_max))
    if tabled and profile.weights.get(NODE_AFFINITY) != weights.node_affinity:
        notes.append(
            f"the scheduler weighs NodeAffinity {profile.weights.get(NODE_AFFINITY, 0)}, the policy's terms "
            f"were compiled for {weights.node_affinity}: set schedulerWeights.nodeAffinity in the policy to match"
        )
    if tabled and netqos_weight != weights.netqos:
        notes.append(
            f"the NetQoS plugin is weighed {netqos_weight} here, the policy's terms were compiled for "
            f"{weights.netqos} (schedulerWeights.netqos)"
        )
    offsets = _offsets(ranking, netqos)
    if len(ranking.feasible) > 1 and offsets:
        if len(offsets) == 1:
            notes.append(
                f"TOTAL - NETQOS TOTAL is {offsets.pop()} on every feasible node: the two schedulers rank them alike"
            )
        else:
            notes.append(
                f"TOTAL - NETQOS TOTAL ranges from {min(offsets)} to {max(offsets)} over the feasible nodes: "
                "the stock scheduler's lead between them is not the NetQoS scheduler's "
                '(docs/scheduling.md, "Where the stock scheduler differs from the plugin")'
            )
    return tuple(notes)


def _table_note(rule: Rule, weights: SchedulerWeights, own_max: int) -> str:
    table = rule.table
    assert table is not None  # only rules compiled from a table get here
    scores = ", ".join(f"{value} {score}" for value, score in table.scores)
    note = (
        f"rule {rule.name} states the NetQoS plugin's table ({table.key}: {scores}, any other value or none "
        f"{table.unlisted}), compiled for NodeAffinity weight {weights.node_affinity} "
        f"and NetQoS weight {weights.netqos}"
    )
    if own_max:
        return (
            f"{note}; beside the pod's own preferred terms, which give one node at most {own_max} points, it goes "
            f"in without the constant (normalised together with them it would dilute their weights), scaled to "
            f"{own_max} x {weights.netqos} / (100 x {weights.node_affinity}) per point of the table, the plugin's "
            "proportion: TOTAL - NETQOS TOTAL below shows how close that comes"
        )
    constant = next((t.weight for t in rule.preferences if t.term.expressions[0].operator == "Exists"), 0)
    if not constant:
        return note
    classes = [{table.key: value} for value, _ in table.scores] + [{}]
    top = max(sum(t.weight for t in rule.preferences if t.matches(labels)) for labels in classes)
    return (
        f"{note}: {table.key} Exists and {table.key} DoesNotExist give every node {constant}, so a top-scoring "
        f"node's raw score is {top} and only the differences count"
    )


def _offsets(ranking: Ranking, netqos: Ranking) -> set[int]:
    netqos_totals = {n.name: n.total for n in netqos.nodes}
    return {
        n.total - total
        for n in ranking.feasible
        if n.total is not None and (total := netqos_totals.get(n.name)) is not None
    }


def _generate_name(pod: dict[str, Any]) -> str:
    """The prefix of the name the API server gives a pod of a controller (`web-`), "" when none."""
    meta = pod.get("metadata")
    prefix = meta.get("generateName") if isinstance(meta, dict) else None
    return prefix if isinstance(prefix, str) else ""


def _namespace(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    return namespace if isinstance(namespace, str) and namespace else "default"


def _notes(
    pod: PodInfo,
    ranking: Ranking,
    nodes: Sequence[Node],
    profile: Profile,
    pods_given: bool,
    image_sizes: Sequence[ImageSizes] = (),
) -> tuple[str, ...]:
    notes = []
    feasible = len(ranking.feasible)
    if pod.node_name:
        notes.append(
            f"spec.nodeName is {pod.node_name!r}: the scheduler never sees this pod; "
            "the kubelet of that node runs it (shown as the NodeName filter would judge it)"
        )
    for problem in required_term_problems(
        pod.required or (), f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms"
    ):
        notes.append(
            f"kube-scheduler cannot parse the required term {problem}: that term matches no node "
            "(the API server accepts it only in pods created before it validated such values)"
        )
    if feasible == 0:
        notes.append("no node is feasible: the pod would stay Pending (FailedScheduling)")
    elif ranking.scoring_fails:
        notes.append(
            f"kube-scheduler cannot parse the preferred term {ranking.score_failure}: NodeAffinity's PreScore "
            "fails for the whole scheduling cycle, so the pod stays Pending, retried with back-off, for as long "
            "as more than one node is feasible (the API server accepts invalid values in preferred terms); "
            "fix or remove that term; the scores show what they would be without it"
        )
    elif ranking.scoring_skipped:
        notes.append(
            f"only {ranking.feasible[0].name} is feasible: kube-scheduler binds the pod there without "
            "scoring (no Score plugin runs, the NetQoS plugin's neither); the scores show what scoring would give"
            + (
                f"; scoring would fail on the preferred term {ranking.score_failure}, which kube-scheduler "
                "cannot parse, as soon as a second node is feasible"
                if ranking.score_failure
                else ""
            )
        )
    elif len(ranking.predicted) > 1:
        notes.append(f"the best totals tie: {cycle.TIES}")
    if pod.scheduler_name != profile.scheduler_name:
        notes.append(
            f"spec.schedulerName is {pod.scheduler_name!r}: shown under the default profile; give that "
            "scheduler's KubeSchedulerConfiguration with --scheduler-config"
        )
    if not pods_given:
        notes.append("no --pods: the nodes are taken as empty (give kubectl get pods -A -o yaml to count their pods)")
    unknown = [n.name for n in nodes if n.allocatable == {}]
    if unknown:
        notes.append(
            f"no status.allocatable on {', '.join(unknown)}: kube-scheduler counts nothing allocatable "
            "there, so no pod fits (Too many pods)"
        )
    if BALANCED_ALLOCATION in ranking.skipped:
        notes.append(
            "the pod requests no cpu or memory: NodeResourcesBalancedAllocation skips it (best-effort pod), "
            "and NodeResourcesFit counts it as 100m CPU and 200Mi memory"
        )
    notes += [_image_sizes_note(sizes) for sizes in image_sizes]
    spread = _spread_note(pod, profile)
    if spread:
        notes.append(spread)
    notes.append(_not_evaluated_note(pod, profile))
    return tuple(notes)


def _sampling_notes(
    landing: Landing, netqos: Landing, profile: Profile, target: Target, fast: Sequence[str]
) -> tuple[str, ...]:
    """What sampling does to this pod (`fast`: the target's nodes), when a cycle scores only some
    of the feasible nodes."""
    if not landing.sampled and not netqos.sampled:
        return ()
    percentage = profile.percentage_of_nodes_to_score
    return (
        f"{landing.walked} nodes: kube-scheduler stops filtering once it has found {landing.wanted} of the "
        f"{landing.feasible} feasible nodes (percentageOfNodesToScore {percentage or 'adaptive'}), starting where "
        f"the cycle before stopped, and scores only those: over every start, the pod lands on a {target} node "
        f"with probability {landing.of(fast):.2f} (under the NetQoS scheduler plugin's profile, "
        f"{netqos.of(fast):.2f}); P is each node's share, TOTAL is over every feasible node",
    )


def _image_sizes_note(sizes: ImageSizes) -> str:
    """What explain takes for an image nodes report at different sizes, and whether it matters."""
    reported = "; ".join(f"{_size(size)} on {_listed(names)}" for size, names in sizes.reported)
    note = (
        f"nodes report image {sizes.image} at different sizes ({reported}): kube-scheduler's cache keeps one "
        "size per image name, the first node's it adds, and ImageLocality scores every node that has the image "
        f"by it; taken as {sizes.node}'s {_size(sizes.size)}, the oldest such node (by creationTimestamp, then name)"
    )
    if sizes.decides:
        note += (
            "; the prediction turns on it: had the scheduler added the nodes in another order (by name, when it "
            "started after they joined), it could keep another size and pick other nodes"
        )
    return note


def _size(size: int) -> str:
    """A size in MiB when whole, else in bytes: two sizes never read alike."""
    return f"{size:,} bytes" if size % 2**20 else f"{size // 2**20} MiB"


def _listed(names: Sequence[str], shown: int = 3) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _spread_note(pod: PodInfo, profile: Profile) -> str | None:
    """What PodTopologySpread spreads the pod by, when its default constraints are in play."""
    if POD_TOPOLOGY_SPREAD not in profile.weights or pod.spread:
        return None
    if profile.spread_defaults == () and (
        pod.default_spread is not None or any(k in SPREAD_OWNERS for k in pod.owner_kinds)
    ):
        return (
            "PodTopologySpread's args give defaultingType List and no defaultConstraints: the pod, without "
            "topologySpreadConstraints of its own, is not spread"
        )
    if pod.default_spread is not None:
        labels = ", ".join(f"{k}={v}" for k, v in pod.default_spread.match_labels)
        more = " and more" if pod.default_spread.match_expressions else ""
        return (
            f"PodTopologySpread's {_default_constraints(profile)} spread the pod from the pods its Services and "
            f"controller select ({labels or 'by expressions'}{more})"
        )
    owner = next((k for k in pod.owner_kinds if k in SPREAD_OWNERS), None)
    if owner:
        return (
            f"the pod belongs to a {owner} that was not read (give it, and the Services, in --pods): "
            "PodTopologySpread's default spreading from its siblings is not evaluated"
        )
    return None


def _default_constraints(profile: Profile) -> str:
    """The profile's default spread constraints, in words."""
    if profile.spread_defaults is None:
        return "system default constraints (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway)"
    listed = ", ".join(f"{c.topology_key} maxSkew {c.max_skew} {c.when_unsatisfiable}" for c in profile.spread_defaults)
    return f"default constraints of its args ({listed})"


def _not_evaluated_note(pod: PodInfo, profile: Profile) -> str:
    concerns = []
    for use, what in (
        ("volumes", "its volumes"),
        ("DynamicResources", "its resource claims"),
    ):
        if use in pod.uses:
            concerns.append(f"{what} are not evaluated")
    listed = ", ".join(profile.not_evaluated)
    head = f"not evaluated: {listed}; the prediction assumes they pass every node and score all nodes alike"
    settings = not_evaluated_summary(profile)
    return head + (f" ({'; '.join(concerns)})" if concerns else "") + (f"; {settings}" if settings else "")
