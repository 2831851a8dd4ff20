"""apimachinery's name and label rules: webhook.validation answers as Go does.

Two tables. The first states the rules as the Go source reads (k8s.io/apimachinery v0.36.3,
pkg/api/validate/content/kube.go and dns.go): which strings are valid, case by case, written by
hand. The second holds every function to Go's own answers, messages word for word, recorded in
tests/fixtures/validation/go-results.json by the Go program beside it (tests/tools re-runs it).
"""

from __future__ import annotations

import json

import pytest

from tests.fixtures import FIXTURES
from webhook import validation

A63 = "a" * 63
SUBDOMAIN_253 = ".".join(["a" * 63] * 3 + ["a" * 61])

# value, (qualified name, label value, DNS-1123 label, DNS-1123 subdomain) validity
RULES = [
    ("empty", "", (False, True, False, False)),
    ("one letter", "a", (True, True, True, True)),
    ("upper case", "A", (True, True, False, False)),
    ("one digit", "0", (True, True, True, True)),
    ("a dash alone", "-", (False, False, False, False)),
    ("dash at the end", "a-", (False, False, False, False)),
    ("dash at the start", "-a", (False, False, False, False)),
    ("dot at the end", "a.", (False, False, False, False)),
    ("dot at the start", ".a", (False, False, False, False)),
    ("underscore at the end", "a_", (False, False, False, False)),
    ("underscore inside", "a_b", (True, True, False, False)),
    ("dot inside", "a.b", (True, True, False, True)),
    ("two dots inside", "a..b", (True, True, False, False)),
    ("dash inside", "a-b", (True, True, True, True)),
    ("63 bytes", A63, (True, True, True, True)),
    ("64 bytes", "a" * 64, (False, False, False, True)),
    ("trailing newline", "net\n", (False, False, False, False)),
    ("value with a trailing newline", "latency-sensitive\n", (False, False, False, False)),
    ("leading newline", "\nnet", (False, False, False, False)),
    ("trailing space", "net ", (False, False, False, False)),
    ("CRLF", "net\r\n", (False, False, False, False)),
    ("a non-ASCII digit", "\u0663", (False, False, False, False)),
    ("a letter and a non-ASCII digit", "a\u0663", (False, False, False, False)),
    ("a non-ASCII letter", "\u00e9", (False, False, False, False)),
    ("the Kelvin sign (folds to k)", "\u212a", (False, False, False, False)),
    ("full-width letters", "\uff4e\uff45\uff54", (False, False, False, False)),
    ("empty prefix", "/net", (False, False, False, False)),
    ("prefixed", "example.com/net", (True, False, False, False)),
    ("empty name after a prefix", "example.com/", (False, False, False, False)),
    ("two slashes", "a/b/c", (False, False, False, False)),
    ("upper-case prefix", "Example.com/net", (False, False, False, False)),
    ("prefix starting with a dash", "-example.com/net", (False, False, False, False)),
    ("prefix ending with a dot", "example.com./net", (False, False, False, False)),
    ("prefixed name with a trailing newline", "example.com/net\n", (False, False, False, False)),
    ("prefix with a newline", "example.com\n/net", (False, False, False, False)),
    ("prefix with an underscore", "ex_ample.com/net", (False, False, False, False)),
    ("prefixed name of 63", "example.com/" + A63, (True, False, False, False)),
    ("prefixed name of 64", "example.com/" + "a" * 64, (False, False, False, False)),
    ("253-byte subdomain", SUBDOMAIN_253, (False, False, False, True)),
    ("254-byte subdomain", SUBDOMAIN_253 + "a", (False, False, False, False)),
    ("253-byte prefix", SUBDOMAIN_253 + "/net", (True, False, False, False)),
    ("254-byte prefix", SUBDOMAIN_253 + "a/net", (False, False, False, False)),
    ("subdomain label of 64 (Go checks only the total)", "a" * 64 + ".com", (False, False, False, True)),
    ("a negative number", "-1", (False, False, False, False)),
    ("a signed number", "+5", (False, False, False, False)),
    ("leading zeros", "007", (True, True, True, True)),
]


@pytest.mark.parametrize("case, value, expected", RULES, ids=[r[0] for r in RULES])
def test_each_rule_accepts_exactly_what_go_accepts(case, value, expected):
    got = (
        not validation.is_qualified_name(value),
        not validation.is_valid_label_value(value),
        not validation.is_dns1123_label(value),
        not validation.is_dns1123_subdomain(value),
    )
    assert got == expected, case


def test_the_caseless_subdomain_folds_case_as_re2_does_and_nothing_more():
    # RE2's (?i) folds by Unicode simple case folding: the Kelvin sign and the long s are letters
    # to it; the dotted and dotless i (which Python's re.IGNORECASE also folds) are not.
    for good in ("Example.COM", "\u212a.com", "ex\u017fample.com"):
        assert not validation.is_dns1123_subdomain_caseless(good), repr(good)
    for bad in ("Example.com\n", "\u0131.com", "\u0130.com", "-a.com", "a_b.com", "a" * 254):
        assert validation.is_dns1123_subdomain_caseless(bad), repr(bad)


GO_RESULTS = json.loads((FIXTURES / "validation" / "go-results.json").read_text())
FUNCTIONS = {
    "qualifiedName": validation.is_qualified_name,
    "labelValue": validation.is_valid_label_value,
    "dns1123Label": validation.is_dns1123_label,
    "dns1123Subdomain": validation.is_dns1123_subdomain,
    "dns1123SubdomainCaseless": validation.is_dns1123_subdomain_caseless,
}


@pytest.mark.parametrize("recorded", GO_RESULTS, ids=[repr(r["value"])[:40] for r in GO_RESULTS])
def test_every_message_is_gos_word_for_word(recorded):
    for name, function in FUNCTIONS.items():
        assert function(recorded["value"]) == recorded[name], name


def test_the_recorded_go_answers_cover_every_rule_case():
    recorded = {r["value"] for r in GO_RESULTS}
    assert {value for _, value, _ in RULES} <= recorded


# IsDNS1035Label (pkg/util/validation/validation.go), Service names: a DNS-1123 label that starts
# with a letter. Its message, word for word from the Go source.
DNS1035_ERROR = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
DNS1035 = [
    ("a name", "netqos-webhook", []),
    ("one letter", "a", []),
    ("63 bytes", A63, []),
    ("64 bytes", "a" * 64, ["must be no more than 63 characters"]),
    ("starts with a digit", "1abc", [DNS1035_ERROR]),
    ("upper case", "Bad_Name", [DNS1035_ERROR]),
    ("empty", "", [DNS1035_ERROR]),
    ("dash at the end", "a-", [DNS1035_ERROR]),
    ("a dot", "a.b", [DNS1035_ERROR]),
    ("trailing newline", "svc\n", [DNS1035_ERROR]),
]


@pytest.mark.parametrize("case, value, errors", DNS1035, ids=[c[0] for c in DNS1035])
def test_a_dns1035_label_is_a_dns1123_label_starting_with_a_letter(case, value, errors):
    assert validation.is_dns1035_label(value) == errors
