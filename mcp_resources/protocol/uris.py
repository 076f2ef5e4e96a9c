"""RFC 6570 level-1 URI templates (``{var}`` and ``{+var}``): compile, expand, match, literal prefix, overlap.

No Django imports but the exception module. Templates are compiled once. Matching never backtracks: a template
with one variable is an anchored regular expression with a single quantifier; with several variables (whose values
may contain the literal text between them, so a backtracking regex would take O(n**k) steps) a dynamic programme
over the URI finds the same greedy match in O(len(uri) * len(template)).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from urllib.parse import quote, unquote

from mcp_resources.exceptions import TemplateError

MAX_URI_LENGTH = 2048

# RFC 3986 character classes.
_UNRESERVED = "A-Za-z0-9\\-._~"
_RESERVED = ":/?#\\[\\]@!$&'()*+,;="
_VARNAME = re.compile(r"^(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*$")
_EXPRESSION = re.compile(r"\{([^{}]*)\}")

# What a variable may match. ``{var}`` values are percent-encoded except unreserved characters, so a match
# never spans a reserved character; non-ASCII characters are allowed (IRIs). ``{+var}`` may contain anything
# but whitespace and the template delimiters.
SIMPLE_CLASS = f"[^{_RESERVED}\\s{{}}]"
RESERVED_CLASS = "[^\\s{}]"


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class Variable:
    name: str
    reserved: bool  # ``{+var}``

    @property
    def char_class(self) -> str:
        return RESERVED_CLASS if self.reserved else SIMPLE_CLASS


Part = Literal | Variable


@dataclass(frozen=True)
class URITemplate:
    """A compiled URI template."""

    template: str
    parts: tuple[Part, ...]

    @cached_property
    def regex(self) -> re.Pattern[str]:
        pattern = []
        for part in self.parts:
            if isinstance(part, Literal):
                pattern.append(re.escape(part.text))
            else:
                pattern.append(f"(?P<{_group(part.name)}>{part.char_class}+)")
        return re.compile("".join(pattern), re.DOTALL)

    @cached_property
    def variables(self) -> tuple[str, ...]:
        return tuple(p.name for p in self._variable_parts)

    @cached_property
    def _variable_parts(self) -> tuple[Variable, ...]:
        return tuple(p for p in self.parts if isinstance(p, Variable))

    @cached_property
    def _groups(self) -> tuple[str, ...]:
        return tuple(_group(name) for name in self.variables)

    @property
    def literal_prefix(self) -> str:
        """The literal text before the first variable: every matching URI starts with it."""
        prefix = []
        for part in self.parts:
            if isinstance(part, Variable):
                break
            prefix.append(part.text)
        return "".join(prefix)

    @property
    def is_static(self) -> bool:
        return not self.variables

    def match(self, uri: str) -> dict[str, str] | None:
        """Return the decoded variables when ``uri`` matches the template, else ``None``."""
        if len(uri) > MAX_URI_LENGTH:
            return None
        if len(self._variable_parts) == 1:  # the usual template: one anchored expression, one group
            m = self.regex.fullmatch(uri)
            if m is None:
                return None
            (part,) = self._variable_parts
            raw = m.group(self._groups[0])
            if part.reserved or "%" not in raw:
                return {part.name: raw}
            try:
                return {part.name: unquote(raw, errors="strict")}
            except UnicodeDecodeError:
                return None  # percent-escapes that are not UTF-8 name no resource
        spans = self._variable_spans(uri)
        if spans is None:
            return None
        values = {}
        for part, (start, end) in zip(self._variable_parts, spans, strict=True):
            raw = uri[start:end]
            try:
                values[part.name] = raw if part.reserved else unquote(raw, errors="strict")
            except UnicodeDecodeError:
                # Percent-escapes that are not UTF-8 name no resource: no match, never an exception.
                return None
        return values

    def _variable_spans(self, uri: str) -> list[tuple[int, int]] | None:
        """The ``(start, end)`` of each variable in ``uri``, as a greedy regular expression would match them."""
        if len(self._variable_parts) < 2:
            m = self.regex.fullmatch(uri)
            if m is None:
                return None
            return [m.span(group) for group in self._groups]
        n = len(uri)
        parts = self.parts
        # ok[j][i]: uri[i:] matches parts[j:]. Filled backwards, one linear pass per part.
        ok: list[list[bool]] = [[False] * (n + 1) for _ in range(len(parts) + 1)]
        ok[len(parts)][n] = True
        in_class: dict[int, list[bool]] = {}
        for j in range(len(parts) - 1, -1, -1):
            part, cur, nxt = parts[j], ok[j], ok[j + 1]
            if isinstance(part, Literal):
                size = len(part.text)
                for i in range(n - size + 1):
                    cur[i] = nxt[i + size] and uri.startswith(part.text, i)
            else:
                member = [False] * (n + 1)
                for run in _run_regex(part.char_class).finditer(uri):
                    member[run.start() : run.end()] = [True] * (run.end() - run.start())
                in_class[j] = member
                for i in range(n - 1, -1, -1):
                    cur[i] = member[i] and (nxt[i + 1] or cur[i + 1])
        if not ok[0][0]:
            return None
        # Forward: each variable takes the longest value after which the rest of the template still matches.
        spans = []
        i = 0
        for j, part in enumerate(parts):
            if isinstance(part, Literal):
                i += len(part.text)
                continue
            member, nxt = in_class[j], ok[j + 1]
            end = i
            while member[end]:
                end += 1
            while not nxt[end]:
                end -= 1
            spans.append((i, end))
            i = end
        return spans

    @cached_property
    def expansion(self) -> tuple[tuple[str, str | None, str], ...]:
        """Each part as ``(literal, None, "")`` or ``("", variable name, the characters it keeps unencoded)``."""
        unreserved, reserved = _UNRESERVED.replace("\\", ""), _RESERVED.replace("\\", "")
        return tuple(
            (part.text, None, "")
            if isinstance(part, Literal)
            else ("", part.name, unreserved + (reserved + "%" if part.reserved else ""))
            for part in self.parts
        )

    @cached_property
    def _one_variable(self) -> tuple[str, str, str, str] | None:
        """``(literal before, variable name, characters kept, literal after)`` of a template with one variable."""
        names = [name for _, name, _ in self.expansion if name is not None]
        if len(names) != 1:
            return None
        before = after = ""
        seen = False
        keep = ""
        for literal, name, safe in self.expansion:
            if name is not None:
                seen, keep = True, safe
            elif seen:
                after += literal
            else:
                before += literal
        return before, names[0], keep, after

    def expand(self, variables: Mapping[str, object]) -> str:
        """Expand the template; ``{var}`` values are percent-encoded, ``{+var}`` keep reserved characters."""
        one = self._one_variable
        if one is not None:  # the usual template, without the loop
            before, only, kept, after = one
            value = variables[only]
            if type(value) is int:
                return before + str(value) + after
            if type(value) is str and _kept(kept).fullmatch(value):
                return before + value + after
            return before + quote(str(value), safe=kept) + after
        out = []
        for literal, name, safe in self.expansion:
            if name is None:
                out.append(literal)
                continue
            if name not in variables:
                raise KeyError(name)
            value = variables[name]
            # An integer's digits and sign are unreserved, and so is text made only of characters quote() keeps:
            # quote() would return them unchanged.
            if type(value) is int:
                out.append(str(value))
            elif type(value) is str and _kept(safe).fullmatch(value):
                out.append(value)
            else:
                out.append(quote(str(value), safe=safe))
        return "".join(out)

    def __str__(self) -> str:
        return self.template


@cache
def _kept(safe: str) -> re.Pattern[str]:
    """Text that ``quote(text, safe=safe)`` returns unchanged: ASCII letters, digits, ``_.-~`` and ``safe``."""
    return re.compile("[A-Za-z0-9_.\\-~" + re.escape(safe) + "]*")


@cache
def _run_regex(char_class: str) -> re.Pattern[str]:
    return re.compile(f"{char_class}+", re.DOTALL)


@cache
def _group(name: str) -> str:
    return "v_" + re.sub(r"[^A-Za-z0-9_]", lambda m: f"_{ord(m.group()):x}_", name)


def compile_template(template: str) -> URITemplate:
    """Parse ``template`` or raise :class:`TemplateError` explaining what is wrong."""
    if not isinstance(template, str) or not template:
        raise TemplateError("a URI template must be a non-empty string")
    if len(template) > MAX_URI_LENGTH:
        raise TemplateError(f"a URI template may be at most {MAX_URI_LENGTH} characters")
    if any(ch.isspace() for ch in template):
        raise TemplateError("a URI template may not contain whitespace")
    parts: list[Part] = []
    seen: set[str] = set()
    pos = 0
    for m in _EXPRESSION.finditer(template):
        literal = template[pos : m.start()]
        _check_literal(literal)
        if literal:
            parts.append(Literal(literal))
        if parts and isinstance(parts[-1], Variable):
            raise TemplateError(f"variables must be separated by literal text in {template!r}")
        body = m.group(1)
        reserved = body.startswith("+")
        name = body[1:] if reserved else body
        if not _VARNAME.match(name):
            raise TemplateError(f"unsupported expression {{{body}}}: only level-1 {{var}} and {{+var}} are supported")
        if name in seen:
            raise TemplateError(f"variable {name!r} appears twice")
        seen.add(name)
        parts.append(Variable(name, reserved))
        pos = m.end()
    tail = template[pos:]
    _check_literal(tail)
    if tail:
        parts.append(Literal(tail))
    if ":" not in template.split("{", 1)[0] or not re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*:", template):
        raise TemplateError("a URI template must start with a scheme, such as 'app://'")
    return URITemplate(template, tuple(parts))


def _check_literal(text: str) -> None:
    if "{" in text or "}" in text:
        raise TemplateError(f"unbalanced brace in {text!r}")


def validate_uri(uri: object) -> str:
    """Return ``uri`` if it is an acceptable resource URI string, else raise ``ValueError``."""
    if not isinstance(uri, str) or not uri:
        raise ValueError("a resource URI must be a non-empty string")
    if len(uri) > MAX_URI_LENGTH:
        raise ValueError(f"a resource URI may be at most {MAX_URI_LENGTH} characters")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in uri):
        raise ValueError("a resource URI may not contain control characters")
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in uri):
        # A lone surrogate (possible through a JSON \u escape) has no UTF-8 form: no database can look it up.
        raise ValueError("a resource URI may not contain lone surrogates")
    if not re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*:", uri):
        raise ValueError("a resource URI must start with a scheme")
    return uri


def _transitions(template: URITemplate) -> list[tuple[str | None, str | None, bool]]:
    """Flatten a template to a list of steps: (literal char, char class, repeatable)."""
    steps: list[tuple[str | None, str | None, bool]] = []
    for part in template.parts:
        if isinstance(part, Literal):
            steps.extend((ch, None, False) for ch in part.text)
        else:
            steps.append((None, part.char_class, True))
    return steps


def _step_accepts(step: tuple[str | None, str | None, bool], ch: str) -> bool:
    literal, cls, _ = step
    if literal is not None:
        return literal == ch
    assert cls is not None
    return re.fullmatch(cls, ch) is not None


def templates_overlap(a: URITemplate, b: URITemplate) -> bool:
    """True when some URI matches both templates (product automaton reachability)."""
    sa, sb = _transitions(a), _transitions(b)
    # A representative character for each class intersection, plus every literal character in either template.
    alphabet = {ch for step in sa + sb if step[0] is not None for ch in step[0]} | {"a", "%", "é"}
    start = (0, 0, False, False)  # position in a, in b, and whether each is inside a variable repetition
    seen = {start}
    stack = [start]
    while stack:
        i, j, in_a, in_b = stack.pop()
        if i == len(sa) and j == len(sb):
            return True
        for ch in alphabet:
            next_a = _advance(sa, i, in_a, ch)
            next_b = _advance(sb, j, in_b, ch)
            for na in next_a:
                for nb in next_b:
                    state = (na[0], nb[0], na[1], nb[1])
                    if state not in seen:
                        seen.add(state)
                        stack.append(state)
    return False


def _advance(steps: list[tuple[str | None, str | None, bool]], i: int, inside: bool, ch: str) -> list[tuple[int, bool]]:
    """States reachable by consuming ``ch``: ``(index, inside)`` where inside means a variable may repeat."""
    out: list[tuple[int, bool]] = []
    # Inside a variable (past its first character at i - 1), it may take more.
    if inside and _step_accepts(steps[i - 1], ch):
        out.append((i, True))
    if i < len(steps) and _step_accepts(steps[i], ch):
        out.append((i + 1, steps[i][2]))
    return out


def can_start_with(template: URITemplate, prefix: str) -> bool:
    """True when some URI matching ``template`` could start with ``prefix`` (for prefix push-down)."""
    if template.is_static:
        return template.template.startswith(prefix)
    literal = template.literal_prefix
    return literal.startswith(prefix) or prefix.startswith(literal)
