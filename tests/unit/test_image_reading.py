"""What harness/image.py reads from a Dockerfile (the images its stages start from, which the local
build must stand in for) and how it attributes an image's bytes to parts in the size record."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import image

STAGED = """\
# syntax=docker/dockerfile:1
FROM python:3.12.8-slim-bookworm AS build
RUN pip wheel . \\
 # a comment between continuation lines, which Docker drops
 && pip install /wheels/*.whl
FROM python:3.12.8-slim-bookworm AS runtime
COPY --from=build /opt /opt
FROM build AS again
FROM scratch
COPY --from=runtime / /
USER 65532:65532
ENTRYPOINT ["netqos-webhook", "serve"]
CMD ["--bind=0.0.0.0:8443"]
"""


def test_only_pulled_images_are_bases_not_scratch_nor_an_earlier_stage(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(STAGED)
    assert image.dockerfile(path) == image.Dockerfile(
        bases=("python:3.12.8-slim-bookworm", "python:3.12.8-slim-bookworm"),
        user="65532:65532",
        entrypoint=["netqos-webhook", "serve"],
        cmd=["--bind=0.0.0.0:8443"],
    )


def test_a_comment_between_continuation_lines_is_dropped_not_an_instruction() -> None:
    runs = [line for line in image._instructions(STAGED) if line.startswith("RUN")]
    assert runs == ["RUN pip wheel .  && pip install /wheels/*.whl"]


@pytest.mark.parametrize(
    "path, part",
    [
        (
            "/opt/netqos/lib/python3.11/site-packages/kubernetes/client/api_client.py",
            "/opt/netqos/lib/python3.11/site-packages/kubernetes",
        ),
        (
            "/opt/netqos/lib/python3.11/site-packages/typing_extensions.py",
            "/opt/netqos/lib/python3.11/site-packages/typing_extensions.py",
        ),
        ("/usr/lib/python3/dist-packages/pip/__init__.py", "/usr/lib/python3/dist-packages/pip"),
        ("/usr/lib/x86_64-linux-gnu/gconv/UTF-16.so", "/usr/lib/x86_64-linux-gnu/gconv"),
        ("/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "/usr/lib/x86_64-linux-gnu/libcrypto.so.3"),
        ("/usr/lib/python3.11/json/decoder.py", "/usr/lib/python3.11"),
        ("/usr/bin/python3.11", "/usr/bin/python3.11"),
    ],
)
def test_a_file_counts_towards_its_package_its_library_or_its_first_three_components(path: str, part: str) -> None:
    assert image.part_of(path) == part


def test_the_bytes_by_kind_add_up_and_the_product_is_the_webhook_package() -> None:
    site = "/opt/netqos/lib/python3.11/site-packages"
    held = image.Contents(
        frozenset(),
        {
            f"{site}/webhook/cli.py": 10,
            f"{site}/netqos_webhook-0.1.0.dist-info/RECORD": 1,
            f"{site}/flask/app.py": 100,
            "/usr/lib/python3.11/ssl.py": 1000,
            "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0": 2000,
            "/usr/bin/bash": 10000,
        },
    )
    assert list(image._by_kind(held).values()) == [11, 100, 3000, 10000]
