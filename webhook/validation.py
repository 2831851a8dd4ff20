"""apimachinery's name and label rules, with Go's semantics: the one place that says what a label
key, a label value, a DNS-1123 label or subdomain is. Every validator in the project calls these;
none carries a regex of its own.

Reproduced from k8s.io/apimachinery v0.36.3, `pkg/api/validate/content/kube.go` (IsLabelKey,
which `IsQualifiedName` aliases; IsLabelValue, which `validation.IsValidLabelValue` aliases) and
`pkg/api/validate/content/dns.go` (IsDNS1123Label, IsDNS1123Subdomain,
IsDNS1123SubdomainCaseless), and `pkg/util/validation/validation.go` (IsDNS1035Label, for Service
names). Each function returns Go's list of error messages, empty when the value is valid, so a
caller can show the API server's own words.

Where Python and Go differ, Go wins:
- Go's regexps are RE2 matches anchored with `^...$`, which match the whole string. Python's
  `re.match` with `$` also accepts a trailing newline ("net\\n"): every pattern here is used
  with `fullmatch` and has no `$`.
- Character classes are spelled out as ASCII ranges (`[0-9]`, never `\\d`, which matches "٣").
- Lengths are Go's `len`: bytes of UTF-8, not code points.
"""

from __future__ import annotations

import ipaddress
import re

# content/kube.go
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY = re.compile(_LABEL_KEY_FMT)
_LABEL_KEY_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
LABEL_KEY_NAME_MAX_LENGTH = 63
_LABEL_VALUE_FMT = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
LABEL_VALUE_MAX_LENGTH = 63

# content/dns.go
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_LABEL_ERR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
DNS1123_LABEL_MAX_LENGTH = 63
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL = re.compile(_DNS1035_LABEL_FMT)
_DNS1035_LABEL_ERR = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
DNS1035_LABEL_MAX_LENGTH = 63
_DNS1123_SUBDOMAIN_FMT = rf"{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
# Go spells the caseless form "(?i)" + the pattern. RE2 folds by Unicode's simple case folding,
# so its (?i)[a-z] is the ASCII letters plus the long s (U+017F, folds to s) and the Kelvin sign
# (U+212A, folds to k); Python's re.IGNORECASE also folds the dotted and dotless i, so the class
# is spelled out instead.
_CASELESS_ALNUM = "[A-Za-z0-9\u017f\u212a]"
_CASELESS_LABEL = f"{_CASELESS_ALNUM}([-A-Za-z0-9\u017f\u212a]*{_CASELESS_ALNUM})?"
_DNS1123_SUBDOMAIN_CASELESS = re.compile(rf"{_CASELESS_LABEL}(\.{_CASELESS_LABEL})*")
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_CASELESS_ERR = (
    "an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
DNS1123_SUBDOMAIN_MAX_LENGTH = 253

_GO_INT = re.compile("[+-]?[0-9]+")  # what strconv.ParseInt(s, 10, 64) accepts, range aside
_INT64 = (-(2**63), 2**63 - 1)


def go_len(value: str) -> int:
    """Go's len(string): bytes of UTF-8 (a lone surrogate, which YAML can carry, counts as 3)."""
    return len(value.encode("utf-8", "surrogatepass"))


def max_len_error(length: int, unit: str = "bytes") -> str:
    """content.MaxLenError says "bytes"; util/validation's older copy, which IsDNS1123Label and
    IsDNS1123Subdomain still call, says "characters" (and counts bytes all the same)."""
    return f"must be no more than {length} {unit}"


def empty_error() -> str:
    return "must be non-empty"


def regex_error(message: str, pattern: str, *examples: str) -> str:
    """content.RegexError: the message, examples and the pattern, word for word as Go builds it."""
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def is_qualified_name(value: str) -> list[str]:
    """IsQualifiedName (= content.IsLabelKey): `[prefix/]name`; the prefix a DNS-1123 subdomain
    (not empty when the '/' is there), the name 1-63 of `[-A-Za-z0-9_.]` starting and ending
    alphanumeric. Label keys, annotation keys, node-selector keys."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs.extend("prefix part " + m for m in _dns1123_subdomain(prefix, "bytes"))
    else:
        example = regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        return [
            f"a valid label key {example} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + empty_error())
    elif go_len(name) > LABEL_KEY_NAME_MAX_LENGTH:
        errs.append("name part " + max_len_error(LABEL_KEY_NAME_MAX_LENGTH))
    if not _LABEL_KEY.fullmatch(name):
        errs.append("name part " + regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """IsValidLabelValue (= content.IsLabelValue): empty, or at most 63 of `[-A-Za-z0-9_.]`
    starting and ending alphanumeric."""
    errs: list[str] = []
    if go_len(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(LABEL_VALUE_MAX_LENGTH))
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label (util/validation): 1-63 of `[-a-z0-9]`, starting and ending alphanumeric
    (namespaces, Service names, the policy's rule names)."""
    errs: list[str] = []
    if go_len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH, "characters"))
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            # a valid subdomain and not a valid label: the length was checked, so it has dots
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_ERR, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    """IsDNS1035Label (util/validation): 1-63 of `[-a-z0-9]`, starting with a letter and ending
    alphanumeric (Service names: ValidateServiceName is NameIsDNS1035Label)."""
    errs: list[str] = []
    if go_len(value) > DNS1035_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1035_LABEL_MAX_LENGTH, "characters"))
    if not _DNS1035_LABEL.fullmatch(value):
        errs.append(regex_error(_DNS1035_LABEL_ERR, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain (util/validation): at most 253 bytes of dot-separated DNS-1123 labels
    (each label's length is not checked, as in Go). Object names, host names in certificates."""
    return _dns1123_subdomain(value, "characters")


def _dns1123_subdomain(value: str, unit: str) -> list[str]:
    errs: list[str] = []
    if go_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH, unit))
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_subdomain_caseless(value: str) -> list[str]:
    """IsDNS1123SubdomainCaseless: a subdomain that may use upper-case letters (a host name as a
    user types it, e.g. for --bind)."""
    errs: list[str] = []
    if go_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN_CASELESS.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_CASELESS_ERR, _DNS1123_SUBDOMAIN_FMT, "Example.com"))
    return errs


def is_host(host: str) -> bool:
    """A URL's or bind address's host: an IP address (urlsplit drops an IPv6 address's brackets) or
    a DNS name in any case, ASCII only (RE2's caseless match also folds the Kelvin sign)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return host.isascii() and not is_dns1123_subdomain_caseless(host)


def parse_int64(text: str) -> int | None:
    """`text` as Go's strconv.ParseInt(text, 10, 64) reads it, or None where Go fails (Gt/Lt
    values and node labels, a quantity's exponent).

    Python's int() is laxer (" 7", "1_0", "\u0663" all parse), and a regex `$` accepts a trailing
    newline; either would accept what Go refuses.
    """
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else None
