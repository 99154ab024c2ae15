"""The mTLS principal: a client certificate's subject DN, mapped by `ssl.principal.mapping.rules` (pure).

Shared by the broker's listeners and the schema registry's HTTPS listener, so one certificate is one
principal on both.

Kafka's DefaultKafkaPrincipalBuilder names an SSL client `User:<name>`, where <name> is the certificate
subject as X500Principal.getName() writes it (RFC 2253: most specific RDN first, short keywords, e.g.
`CN=alice,OU=eng,O=acme`), passed through SslPrincipalMapper (KIP-371):

    ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),.*$/$1/L,DEFAULT

- `DEFAULT` keeps the whole DN;
- `RULE:<pattern>/<replacement>/[L|U]` applies when <pattern> matches the whole DN; <replacement> uses
  Java's `$1` group syntax; `L` / `U` lower- or upper-case the result; `\\/` is a literal slash;
- the first rule that applies wins; when none does, the client is refused (Kafka throws NoMatchingRule).

The DN comes from the certificate's DER bytes through `cryptography` (RFC 4514, RFC 2253's successor:
same order, keywords CN, L, ST, O, OU, C, STREET, DC, UID and escaping), so the Python ssl module's
dict form (long names, issuer order) is never used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

# SslPrincipalMapper.RULE_PATTERN and RULE_SPLITTER, from Kafka (Java regex, valid Python too).
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)


class PrincipalMappingError(ValueError):
    """ssl.principal.mapping.rules cannot be parsed (refused at start-up)."""


class NoMatchingRule(Exception):
    """No mapping rule applies to a client's DN (the client is refused)."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        result = self.pattern.sub(self.replacement, dn)  # Java's replaceAll
        return result.lower() if self.lower else result.upper() if self.upper else result


class PrincipalMapper:
    """Kafka's SslPrincipalMapper: `PrincipalMapper.parse(rules).name(dn)`."""

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules

    @classmethod
    def parse(cls, text: str) -> PrincipalMapper:
        rules = []
        for item in _split(text or "DEFAULT"):
            match = _PARSER.match(item)
            if match is None or match.end() != len(item):
                raise PrincipalMappingError(f"ssl.principal.mapping.rules: invalid rule {item!r}")
            if match.group(1):
                rules.append(Rule(None))
            elif match.group(2) is not None:
                try:
                    pattern = re.compile(_unescape_slashes(match.group(2)))
                except re.error as exc:
                    raise PrincipalMappingError(f"ssl.principal.mapping.rules: {match.group(2)!r}: {exc}") from None
                flag = match.group(6)
                rules.append(Rule(pattern, _python_replacement(match.group(4)), flag == "L", flag == "U"))
            elif match.group(7):
                raise PrincipalMappingError(f"ssl.principal.mapping.rules: invalid rule {item!r}")
        return cls(tuple(rules))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to {dn!r}")


def _split(text: str) -> list[str]:
    """SslPrincipalMapper.splitRules: rules are comma-separated, but a RULE's pattern may hold commas."""
    out = []
    position = 0
    while position < len(text):
        match = _SPLITTER.match(text, position)
        if match is None or match.end() == position:
            break
        if match.group(1):
            out.append(match.group(1))
        position = match.end()
    return out


def _unescape_slashes(pattern: str) -> str:
    return pattern.replace("\\/", "/")


def _python_replacement(java: str) -> str:
    """Java's replacement syntax ($1, \\x literal) as Python's (\\g<1>, escaped backslashes)."""
    out = []
    i = 0
    while i < len(java):
        ch = java[i]
        if ch == "\\" and i + 1 < len(java):
            out.append("\\\\" if java[i + 1] == "\\" else java[i + 1])
            i += 2
        elif ch == "$" and i + 1 < len(java) and java[i + 1].isdigit():
            j = i + 1
            while j < len(java) and java[j].isdigit():
                j += 1
            out.append(f"\\g<{java[i + 1:j]}>")
            i = j
        else:
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
    return "".join(out)


def subject_dn(der: bytes) -> str:
    """The certificate's subject in RFC 2253 / 4514 form, as Kafka (X500Principal.getName()) writes it."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def certificate_principal(der: bytes | None, mapper: PrincipalMapper) -> str | None:
    """`User:<mapped DN>` of a client certificate; None without one. Raises NoMatchingRule."""
    if not der:
        return None
    return f"User:{mapper.name(subject_dn(der))}"
