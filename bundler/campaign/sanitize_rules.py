"""The sanitizer's rules: the patterns each rule matches, its RE2 gate, and secret names.

``specs/sanitizer.md`` is the contract and :mod:`bundler.campaign.sanitize` the
table of rules with their replacements; this module holds what each rule
matches, in the order :data:`RULES` applies them. Every regex here is linear in
its input (``tests/test_sanitize_linear.py``).
"""

from __future__ import annotations

import re

__all__ = [
    "ANY_RE2",
    "API_KEY",
    "AUTHORIZATION",
    "BASIC",
    "BEARER",
    "CAMEL",
    "CREDENTIAL_RULES",
    "DOTTED",
    "FIRST_PASS",
    "HAS_LETTER",
    "HOME",
    "IPV4",
    "IPV6_CANDIDATE",
    "KEY_LITERAL",
    "LABEL",
    "NAME_MAX",
    "NOT_PLACEHOLDER",
    "NOT_SECRET_NAME",
    "PRIVATE_KEY",
    "REDACTED",
    "RULES",
    "RULES_VERSION",
    "RULE_RE2",
    "SECRET_FIELD",
    "SECRET_NAME",
    "SUFFIXES",
    "URL_CREDENTIALS",
    "is_secret_name",
]

RULES_VERSION = "2"

REDACTED = "<redacted>"

RULES: tuple[str, ...] = (
    "private_key",
    "bearer_token",
    "basic_auth",
    "authorization",
    "url_credentials",
    "api_key",
    "key_literal",
    "home_path",
    "ipv4",
    "ipv6",
    "hostname",
)
"""Rule names in the order they are applied; each rule sees the previous rule's output."""

SECRET_FIELD = "secret_field"  # noqa: S105 (a rule name)
"""The rule name counted when a value is replaced because of its key or field name."""

CREDENTIAL_RULES = frozenset({"private_key", "basic_auth", "url_credentials", "key_literal"})
"""Rules precise enough that a finding in a member carried verbatim refuses the seal."""

# Values that are placeholders, not secrets: ``$TOKEN``, ``${TOKEN}``, ``{token}``,
# ``<token>`` (and our own ``<redacted>``, so scrubbing twice changes nothing).
NOT_PLACEHOLDER = r"(?![$<{])"

# --- credentials -----------------------------------------------------------------------------
# detect-secrets 1.5.0 PrivateKeyDetector; gitleaks rule ``private-key``. The body runs to
# the next "-" (base64 has none), so an unterminated block costs one pass, not one per BEGIN.
PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[^-]*+"
    r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
)
# gitleaks rule ``curl-auth-header`` (the header part): any scheme, credentials redacted.
AUTHORIZATION = re.compile(
    r"\b((?:proxy-)?authorization)(\\?[\"']?[ \t]*+[:=][ \t]*+\\?[\"']?)"
    r"(?>((?:basic|bearer|token|digest|negotiate|ntlm|apikey|aws4-hmac-sha256)[ \t]++)?)"
    + NOT_PLACEHOLDER
    + r"[^\s\"'`,;\\]++",
    re.IGNORECASE,
)
# reprobundle rules 1 (RFC 6750 token68 characters).
BEARER = re.compile(r"\b(Bearer)[ \t]++[A-Za-z0-9\-._~+/]++=*+", re.IGNORECASE)
# RFC 7617: base64 of "user:password"; only values that decode to one are redacted.
BASIC = re.compile(r"\b(Basic)[ \t]++([A-Za-z0-9+/]{6,}+={0,2}+)(?![A-Za-z0-9+/=])", re.IGNORECASE)
# detect-secrets 1.5.0 BasicAuthDetector (``://user:password@``), with the user redacted too.
URL_CREDENTIALS = re.compile(
    r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{0,30}+://)"
    r"[^\s:/?#@\"'<>\\]*+:" + NOT_PLACEHOLDER + r"[^\s/?#@\"'<>\\]++@"
)
# An unquoted value that cannot be a credential: empty (null, None, ~), a boolean, or a
# number with a fraction or an exponent. Benchmark tools name measurements after tokens
# ("time_to_first_token": 0.0551) and write "api_key: null": flagging those buried an
# honest import's real findings under a hundred false ones. Integers stay matched (a PIN
# is a number), and so does any quoted value.
NOT_A_CREDENTIAL = (
    r"(?!(?:null|none|~|true|false|-?[0-9]*\.[0-9]+(?:e[-+]?[0-9]+)?|-?[0-9]+e[-+]?[0-9]+)"
    r"(?![^\s\"'`,;&}\\]))"
)
# detect-secrets 1.5.0 KeywordDetector and gitleaks ``generic-api-key`` (name = value), with
# the name decided by ``is_secret_name``: the regex only finds "<identifier ending in a
# keyword> <separator> <value>". The identifier starts where the previous character is not
# an identifier character, so a long identifier is scanned once.
API_KEY = re.compile(
    r"(?<![\w.-])([\w.-]*?(?:token|secret|passw(?:or)?d|pwd|passphrase|credentials?|key))"
    r"(\\?[\"']?[ \t]*+[:=]{1,2}+[ \t]*+)"
    r"(?:(\\?\")" + NOT_PLACEHOLDER + r"[^\"\\\n]*+\\?\""
    r"|(')" + NOT_PLACEHOLDER + r"[^'\\\n]*+'"
    r"|" + NOT_PLACEHOLDER + NOT_A_CREDENTIAL + r"[^\s\"'`,;&}\\]++)",
    re.IGNORECASE,
)
# Vendor token formats. Sources: detect-secrets 1.5.0 plugins (AWSKeyDetector,
# GitHubTokenDetector, GitLabTokenDetector, SlackDetector, StripeDetector, NpmDetector,
# PypiTokenDetector, JwtTokenDetector, OpenAIDetector) and gitleaks ``config/gitleaks.toml``
# rules (aws-access-token, github-pat, github-fine-grained-pat, gitlab-pat, huggingface-
# access-token, huggingface-organization-api-token, gcp-api-key, jwt, slack-*-token,
# anthropic-api-key, openai-api-key). Lengths are lower bounds where vendors have changed
# them. Every alternative starts with a literal and runs over a class the look-behind
# excludes, so it either succeeds or fails within its own run.
KEY_LITERAL = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-[A-Za-z0-9_-]{16,}+"
    r"|[rs]k_(?:live|test)_[A-Za-z0-9]{16,}+"
    r"|hf_[A-Za-z0-9]{20,}+"
    r"|api_org_[A-Za-z0-9]{20,}+"
    r"|gh[pousr]_[A-Za-z0-9]{20,}+"
    r"|github_pat_[A-Za-z0-9_]{22,}+"
    r"|gl(?:pat|dt|ft|soat|rt|cbt|ptt|agent|oas|imt|ffct)-[A-Za-z0-9_-]{20,}+"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}+"
    r"|(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    r"|AIza[A-Za-z0-9_-]{35}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|pypi-AgE[A-Za-z0-9_-]{50,}+"
    r"|eyJ[A-Za-z0-9_-]{4,}+\.[A-Za-z0-9_=-]{4,}+(?:\.[A-Za-z0-9_.+/=-]*+)?"
    r")"
)

# --- identifying details ---------------------------------------------------------------------
HOME = re.compile(
    r"(?:/home|/Users)/(?!<user>)[^/\s\"':\\]++"
    r"|/root(?=/|\b)"
    r"|(?<![A-Za-z])[A-Za-z]:(\\{1,2})Users\1(?!<user>)[^\\/\s\"':]++"
)
IPV4 = re.compile(r"(?<![\w])(?<!\d\.)(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\w])(?!\.\d)")
IPV6_CANDIDATE = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")
# A run of DNS-ish labels; which part of it is a host name is decided in Python
# (``Sanitizer._hosts``), so no regex backtracks over labels.
HAS_LETTER = re.compile(r"[A-Za-z]")
DOTTED = re.compile(r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_-]*+(?:\.[A-Za-z0-9_-]*+)++")
LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
SUFFIXES = frozenset(
    {
        *("local", "lan", "internal", "intranet", "corp", "home", "localdomain"),
        *("com", "net", "org", "io", "cn", "ai", "dev", "cloud"),
    }
)

# A cheap first pass: most strings (ids, enums) match no rule. Every rule's match
# contains one of these (``tests/test_sanitize.py`` checks it for each rule's examples).
FIRST_PASS = re.compile(
    r"bearer|basic|authoriz|key|token|secret|passw|pwd|passphrase|credential"
    r"|sk-|[rs]k_|hf_|api_org_|gh[pousr]_|github_pat_|gl[a-z]{1,6}-|xox|A3T|AKIA|ASIA|ABIA|ACCA"
    r"|AIza|npm_|pypi-|eyJ|://|/home/|/Users/|\\Users\\|/root|\d\.\d|:[0-9A-Fa-f]{0,4}:"
    r"|\.(?:" + "|".join(sorted(SUFFIXES, key=lambda s: (-len(s), s))) + r")(?![A-Za-z0-9_-])",
    re.IGNORECASE,
)
# One RE2 (pyarrow.compute) gate per rule, searched case-insensitively: each matches
# wherever its rule's regex matches, and more, so text a gate does not match is left
# unchanged by that rule. Tighter than FIRST_PASS (a decimal number passes FIRST_PASS's "\d\.\d" but
# no gate), and searched in C: a multi-megabyte line of a benchmark's JSON costs a few
# RE2 passes instead of eleven Python regex passes. Used on ASCII text only, where RE2's
# and Python's \d, \w and case folding agree. The named hosts join "hostname" per
# Sanitizer (``tests/test_sanitize_gates.py`` checks each gate against its rule).
RULE_RE2: dict[str, str] = {
    "private_key": r"PRIVATE KEY",
    "bearer_token": r"bearer[ \t]",
    "basic_auth": r"basic[ \t]",
    "authorization": r"authorization",
    "url_credentials": r"://",
    # The keyword that ends the name, then the separator (API_KEY's groups 1 and 2).
    "api_key": r"(?:token|secret|passw(?:or)?d|pwd|passphrase|credentials?|key)"
    r"\\?[\"']?[ \t]*[:=]",
    "key_literal": r"sk-|[rs]k_(?:live|test)_|hf_|api_org_|gh[pousr]_|github_pat_"
    r"|gl(?:pat|dt|ft|soat|rt|cbt|ptt|agent|oas|imt|ffct)-|xox[abposr]-"
    r"|A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AIza|npm_|pypi-AgE|eyJ",
    "home_path": r"/home/|/users/|/root|users\\",
    "ipv4": r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}",
    "ipv6": r":[0-9a-f]{0,4}:",
    "hostname": r"\.(?:" + "|".join(sorted(SUFFIXES)) + r")",
}
assert tuple(RULE_RE2) == RULES
# Any rule's gate: ASCII text this does not match is left unchanged by every rule.
ANY_RE2 = "|".join(f"(?:{p})" for p in RULE_RE2.values())

# --- secret names ------------------------------------------------------------------------------
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
SECRET_NAME = re.compile(
    r"(?:^|_)(?:token|secret|password|passwd|pwd|passphrase|credentials?"
    r"|(?:api|access|secret|private|auth|client|account|service|signing|encryption|master"
    r"|session)_?key|apikey|authtoken|accesstoken)$"
)
# Names that end like a secret but are not one (tokenizer special tokens).
NOT_SECRET_NAME = re.compile(r"(?:^|_)(?:bos|eos|pad|unk|sep|cls|mask)_token$")
NAME_MAX = 200


def is_secret_name(name: str) -> bool:
    """Whether a key, field or variable called ``name`` holds a secret.

    ``password``, ``HF_TOKEN``, ``x-api-key``, ``aws_secret_access_key``,
    ``SecretAccessKey``, ``--hf-token`` are; ``max_tokens``, ``tokenizer``,
    ``eos_token``, ``sort_key``, ``key_id`` are not.
    """
    if len(name) > NAME_MAX:
        return False
    norm = re.sub(r"[^a-z0-9]+", "_", CAMEL.sub("_", name).lower()).strip("_")
    return bool(SECRET_NAME.search(norm)) and not NOT_SECRET_NAME.search(norm)
