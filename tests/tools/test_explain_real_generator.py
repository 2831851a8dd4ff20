"""benchmarks/explain_real.py's generator with --image-volumes: the clusters of a seed are those it
gives without the flag (the volumes are drawn apart), and some pods mount an image volume of an
image the nodes hold."""

from __future__ import annotations

import random

from benchmarks.explain_real import IMAGES, generate


def cases(seed: int, image_volumes: bool) -> list:
    rng = random.Random(seed)
    return [generate(rng, index, 30, image_volumes) for index in range(20)]


def test_image_volumes_leave_the_seeds_clusters_as_they_were() -> None:
    plain, with_volumes = cases(7, False), cases(7, True)
    for a, b in zip(plain, with_volumes, strict=True):
        assert (a.nodes, a.bound, a.service, a.kind) == (b.nodes, b.bound, b.service, b.kind)
        b.pod["spec"].pop("volumes", None)
        assert a.pod == b.pod
    assert not any("volumes" in c.pod["spec"] for c in plain)


def test_some_pods_mount_an_image_volume_of_an_image_the_nodes_may_hold() -> None:
    volumes = [c.pod["spec"]["volumes"] for c in cases(7, True) if "volumes" in c.pod["spec"]]
    assert 3 <= len(volumes) <= 17
    assert all(
        v == [{"name": "data", "image": {"reference": v[0]["image"]["reference"], "pullPolicy": "IfNotPresent"}}]
        for v in volumes
    )
    assert all(v[0]["image"]["reference"] in IMAGES for v in volumes)
