"""Does the reference solution compute its answer? Perturb the inputs the instruction names
(delete them, shift their digits, drop lines, rotate the letters of their values) and
compare the solution's outputs.

The trials are `audit.trials.PerturbedOracleAgent`; everything here is pure:

- `shortcut_findings`: a new output the verifier checks that stays byte-identical under every
  perturbation (the solution never read its inputs for it) and holds values the solution
  spells out and the instruction never gives (a number, or a word of the input data), which
  the verifier checks (it asserts them, or it rejects the unchanged output once the inputs'
  content changed):
  the reference solution hard-codes its answer. An authored file (a script, a unit file)
  whose constants no check depends on is not a shortcut;
- `computed_tokens`: the values of the outputs that do change (they are computed from the
  inputs); `answer_leaks` looks for them where the agent can read them, in context: a file
  named like an answer, a labelled line, a file that holds the value and nothing else, or a
  whole computed output copied into a file.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Collection, Mapping

from audit.static_checks import (
    ANSWERISH_FILE,
    answer_like,
    channel_kind,
    is_channel,
    labelled_line,
    normalize,
    spelled,
    whole_field,
)
from audit.verdict import Code, Finding, Source
from tasks.literals.model import CoverageVerdict

_TOKEN = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_.@-]*[A-Za-z0-9_])(?![\w])")


def _bounded(value: str, text: str) -> bool:
    pre = r"(?<![\w.])" if value[:1].isalnum() or value[:1] == "-" else ""
    post = r"(?![\w]|\.\d)" if value[-1:].isalnum() else ""
    return re.search(pre + re.escape(value) + post, text) is not None


def _answer_token(tok: str) -> bool:
    """A value, not a word of prose: a number of >= 2 digits or a decimal; a word of >= 3."""
    if tok[:1].isdigit() or tok[:1] == "-":
        return len(tok.lstrip("-").replace(".", "")) >= 2 or "." in tok
    return len(tok) >= 3


def tokens(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(text) if _answer_token(t)}


def unchanged_outputs(
    baseline: Mapping[str, str | None], perturbed: Mapping[str, Mapping[str, str | None]]
) -> list[str]:
    """Outputs that exist and are the same after every perturbation that left them, with at
    least one content perturbation among those. A missing output is no change: a solution
    that stopped early (its inputs deleted, `set -e`) never wrote a constant it echoes last."""
    if not perturbed:
        return []
    return [
        p
        for p, h in sorted(baseline.items())
        if h is not None
        and all(run.get(p) in (h, None) for run in perturbed.values())
        and any(perturbed.get(m, {}).get(p) == h for m in CONTENT_PERTURBATIONS)
    ]


_AUTHORED_SUFFIXES = (".sh", ".bash", ".py", ".pl", ".rb", ".js", ".sql", ".service", ".timer",
                      ".socket", ".conf", ".cfg", ".ini", ".toml", ".yaml", ".yml", ".mk",
                      ".desktop", ".rules", ".cron", ".env")  # fmt: skip
_AUTHORED_NAMES = ("Makefile", "Dockerfile", "crontab", "config")


def authored(path: str, text: str, solution: str) -> bool:
    """An output the solution authors as a document (a script, a unit file, a config):
    a program or config by its name or shebang, most of whose lines solve.sh writes out.
    Its constants are the author's work, not an answer read off the inputs."""
    base = posixpath.basename(path)
    kind = text.startswith("#!") or base.endswith(_AUTHORED_SUFFIXES) or base in _AUTHORED_NAMES
    lines = [normalize(ln) for ln in text.splitlines() if len(normalize(ln)) >= 3]
    if not kind or not lines:
        return False
    flat = normalize(solution)
    return sum(ln in flat for ln in lines) >= 0.6 * len(lines)


def cached_answer(text: str, reads: Mapping[str, str]) -> str | None:
    """A file the solution read (not an input, not named by the instruction) that holds the
    output's content: the whole of it, or every one of its lines."""
    whole = normalize(text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not whole:
        return None
    for path, content in sorted(reads.items()):
        flat = normalize(content)
        if whole in flat or (lines and all(_bounded(ln, content) for ln in lines)):
            return path
    return None


def verifier_tracks_inputs(
    baseline: Mapping[str, str | None],
    runs: list[tuple[str, Mapping[str, str | None], bool]],
) -> bool:
    """Whether the verifier's expectation follows the inputs: under some content perturbation
    (`runs`: mode, the outputs' hashes, resolved) the solution wrote every output of
    `baseline` unchanged and the verifier rejected them. A run whose solution failed on the
    perturbed inputs and wrote nothing shows nothing of the verifier."""
    return any(
        not resolved
        for mode, hashes, resolved in runs
        if mode in CONTENT_PERTURBATIONS
        and all(hashes.get(p) == h for p, h in baseline.items() if h is not None)
    )


def shortcut_findings(
    baseline: Mapping[str, str | None],
    perturbed: Mapping[str, Mapping[str, str | None]],
    texts: Mapping[str, str],
    solution: str,
    instruction: str,
    inputs: Mapping[str, str],
    asserted: list[str],
    verifier_tracks_inputs: bool,
    cache_reads: Mapping[str, str] | None = None,
    sources_removed: tuple[list[str], Mapping[str, str | None]] | None = None,
    input_reads: set[str] | None = None,
) -> list[Finding]:
    """Shortcut findings (and per-output evidence) from the perturbation trials.

    `baseline`: hash of each checked new output after the plain oracle run; `perturbed`:
    the same after each perturbation; `texts`: the baseline outputs' text; `inputs`: the
    declared inputs' text by image path; `asserted`: the verifier's asserted literal values;
    `verifier_tracks_inputs`: the verifier rejected the (unchanged) outputs once the inputs'
    content changed: its expectation follows the inputs the solution ignored;
    `cache_reads`: {path: text} of files the traced solution read that are neither inputs
    nor named by the instruction; `sources_removed`: those files (data only, /solution's
    included) and each output's hash after a run with them deleted; `input_reads`: the
    declared inputs the traced solution opened (None: not traced).

    An unchanged output is a shortcut when the solution copied it from a file no one
    declared (a cached answer, whether or not solve.sh spells a value), when it changes or
    is not written once those files are deleted (the answer comes from them, in whatever
    encoding: decompressed, decoded, unpickled), when the verifier expects it to follow
    inputs the traced solution never opened (an answer carried in, in whatever encoding,
    not computed), or when it holds checked values the solution spells out. An output the
    solution authors as a document (`authored`) is no spelled answer. (That the verifier
    expects the outputs to follow the inputs is task-wide evidence: alone it flagged a clean
    output that legitimately survives the perturbations, so it counts only with the traced
    solution opening no input, and otherwise lets one-digit values count as spelled.)"""
    reads_inputs = verifier_tracks_inputs
    out: list[Finding] = []
    modes = ", ".join(sorted(perturbed))
    names = sorted(inputs)[:4]
    same = unchanged_outputs(baseline, perturbed)
    for p in sorted(baseline):
        if baseline[p] is None:
            continue
        if p not in same:
            why = f"{p} changes when the declared inputs {names} are perturbed ({modes})"
            out.append(
                Finding(code=Code.INPUTS_PERTURBED, source=Source.TRIAL, item=p, evidence=why)
            )
            continue
        data = "\n".join(inputs.values())
        text = texts.get(p, "")
        # a verifier that follows the inputs makes even a one-digit constant an answer
        small = {t for t in _TOKEN.findall(text) if t.isdigit()} if reads_inputs else set()
        spelled = sorted(
            t
            for t in tokens(text) | small
            if _bounded(t, solution)
            and not _bounded(t, instruction)
            and (t[:1].isdigit() or t[:1] == "-" or _bounded(t, data))
            and (reads_inputs or any(_bounded(t, a) for a in asserted))
        )
        head = f"{p} is byte-identical whether the declared inputs {names} are kept or "
        head += f"perturbed ({modes}; a run that did not write it is no change)"
        cache = cached_answer(text, cache_reads or {})
        if cache is not None:
            why = head + f"; the solution read it from {cache}, a file the instruction never "
            why += "names and no input: a cached answer"
            out.append(
                Finding(code=Code.SOLUTION_SHORTCUT, source=Source.TRIAL, item=p, evidence=why)
            )
        elif sources_removed is not None and sources_removed[1].get(p) != baseline[p]:
            gone = sources_removed[1].get(p) is None
            why = head + f"; it {'is not written' if gone else 'changes'} once "
            why += f"{sources_removed[0][:3]} are deleted, files the solution read that no "
            why += "instruction names and no input is: its answer comes from them"
            out.append(
                Finding(code=Code.SOLUTION_SHORTCUT, source=Source.TRIAL, item=p, evidence=why)
            )
        elif authored(p, text, solution):
            why = head + "; an authored document (a script or config solve.sh writes out)"
            out.append(
                Finding(code=Code.INPUTS_PERTURBED, source=Source.TRIAL, item=p, evidence=why)
            )
        elif reads_inputs and inputs and input_reads is not None and not input_reads:
            why = head + "; the verifier expects it to follow the inputs, and the traced "
            why += f"solution opened none of them ({names}): its answer is carried in, not "
            why += "computed"
            out.append(
                Finding(code=Code.SOLUTION_SHORTCUT, source=Source.TRIAL, item=p, evidence=why)
            )
        elif spelled:
            how = "expects them to follow the inputs" if reads_inputs else "asserts them"
            why = head + f"; solve.sh spells out {spelled[:5]}, which the instruction never "
            why += f"gives and the verifier {how}"
            out.append(
                Finding(code=Code.SOLUTION_SHORTCUT, source=Source.TRIAL, item=p, evidence=why)
            )
        else:
            why = (
                head + "; it holds nothing checked that the solution spells beyond the instruction"
            )
            out.append(
                Finding(code=Code.INPUTS_PERTURBED, source=Source.TRIAL, item=p, evidence=why)
            )
    return out


CONTENT_PERTURBATIONS = ("shift-digits", "drop-lines", "rot13-words")
# letters rotated by 13: the word perturbation, a database's text cells, the corrupt mutant
ROT13 = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
)


def _rot(value: object) -> object:
    if isinstance(value, str):
        return value.translate(ROT13)
    if isinstance(value, list):
        return [_rot(v) for v in value]
    if isinstance(value, dict):
        return {k: _rot(v) for k, v in value.items()}
    return value


def rot13_words(data: bytes) -> bytes:
    """The input with the letters of its *values* rotated (pure): JSON string values (keys
    kept), CSV rows after the header, every line of other text. Binary data is unchanged."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    try:
        return (json.dumps(_rot(json.loads(text)), indent=1) + "\n").encode()
    except json.JSONDecodeError:
        pass
    lines = text.splitlines(keepends=True)
    if lines and all(ln.lstrip().startswith("{") for ln in lines if ln.strip()):
        try:
            return "".join(
                json.dumps(_rot(json.loads(ln))) + "\n" if ln.strip() else ln for ln in lines
            ).encode()
        except json.JSONDecodeError:
            pass
    header = (
        lines[:1] if lines and "," in lines[0] and not any(c.isdigit() for c in lines[0]) else []
    )
    return ("".join(header) + "".join(ln.translate(ROT13) for ln in lines[len(header) :])).encode()


REORDER = "reverse-records"
"""Other records of the same inputs: every line after the first (a header) in reverse order.
Each record and each reference between records is kept; only their order changes."""


def reverse_records(text: str) -> str:
    """The `reverse-records` perturbation of `text` (pure): the first line kept, the others
    reversed, each ending in a newline."""
    lines = [ln.rstrip("\n") for ln in text.splitlines(keepends=True)]
    return "".join(ln + "\n" for ln in lines[:1] + lines[:0:-1])


def keeps_form(text: str, perturbed: str) -> bool:
    """Whether a perturbed input is still of its kind: a JSON document still parses (other
    text is records, a line each)."""
    try:
        json.loads(text)
    except ValueError:
        return True
    try:
        json.loads(perturbed)
    except ValueError:
        return False
    return True


def computed_outputs(
    texts: Mapping[str, str], perturbed_texts: Mapping[str, Mapping[str, str]]
) -> set[str]:
    """Outputs whose content changes when the inputs' content changes (computed)."""
    return {
        p
        for p, text in texts.items()
        for mode, run in perturbed_texts.items()
        if mode in CONTENT_PERTURBATIONS and run.get(p) != text
    }


def computed_tokens(
    texts: Mapping[str, str], perturbed_texts: Mapping[str, Mapping[str, str]]
) -> dict[str, set[str]]:
    """Per output: its values that vanish when the inputs' *content* changes (digits
    shifted, lines dropped, letters rotated): computed from the inputs. Deleting the inputs
    does not count: an output that merely needs its inputs to exist (a copy, a build) is
    not computed. A computed output with no vanishing value keeps an empty set."""
    out: dict[str, set[str]] = {p: set() for p in computed_outputs(texts, perturbed_texts)}
    for p, text in texts.items():
        mine = tokens(text)
        gone: set[str] = set()
        for mode, run in perturbed_texts.items():
            if mode not in CONTENT_PERTURBATIONS:
                continue
            other = run.get(p)
            gone |= mine - (tokens(other) if other is not None else set())
        if gone:
            out[p] = gone
    return out


def short_value(whole: str) -> bool:
    """An output that is one value too short to be told from prose by itself (a digit, a
    two-letter word): found only as a whole line of a hidden channel, never in plain text."""
    return bool(whole) and "\n" not in whole and not tokens(whole)


def inputs_used(
    inputs: Mapping[str, str], opened: Collection[str] | None, gone: Collection[str]
) -> set[str]:
    """The declared inputs ({name: image path}) the reference solution used: those it opened
    or moved away when traced (`opened` None: untraced, all of them). A file the instruction
    names that the solution never touched is not what its answer derives from, so a computed
    answer standing there was given (a schema's `examples`, a reference copy), not an input's
    value copied through."""
    if opened is None:
        return set(inputs)
    used = set(opened) | set(gone)
    return {n for n, path in inputs.items() if path in used}


def given_expectations(
    coverage: list[CoverageVerdict],
    solution: str,
    tracks: bool,
    image: Mapping[str, str],
    opened: Collection[str],
) -> list[Finding]:
    """Expected values of the tests that a file of the image states, where the value is an
    answer: the tests' expectation follows the inputs (`tracks`), the reference solution
    never spells the value (it computes it) and never opened the file (so the value is not
    an input it copies). `coverage`: the static literal verdicts (stated `exact` in
    `environment/<name>`); `image`: {environment name: image path}; `opened`: every file the
    traced solution opened. A literal counts when one of its tokens is answer-like (a long
    number, a decimal, a digest): a short word or count stands in many files by chance."""
    if not tracks:
        return []
    out = []
    for v in coverage:
        lit, where = v.literal, v.where or ""
        name = where.removeprefix("environment/")
        if not v.covered or v.how != "exact" or name == where or name not in image:
            continue
        if image[name] in opened or spelled(lit, solution):
            continue
        if not any(answer_like(t) for t in re.findall(r"[\w.+-]+", lit.value)):
            continue
        why = (
            f"{where} states the tests' expected {lit.value[:80]!r} (asserted at {lit.where}); "
            "the reference solution computes it (never spells it; the tests' expectation "
            "follows the inputs) and never opened that file"
        )
        out.append(
            Finding(code=Code.TEST_LEAKAGE, source=Source.TRIAL, item=lit.value, evidence=why)
        )
    return out


def answer_leaks(
    computed: Mapping[str, set[str]],
    texts: Mapping[str, str],
    visible: Mapping[str, str],
    inputs: set[str],
) -> list[Finding]:
    """Computed output values (or whole computed outputs) visible to the agent, in context;
    or every computed line of an output, each somewhere in one file that is not an input (an
    answer kept as a shell history's `printf 'a 1\\nb 2\\n'`, a Dockerfile's `ENV X="a 1;b 2"`).

    `visible`: {where: text} for the instruction and environment files; `inputs`: the
    `where` names of the declared inputs (data the agent must read: values in them are
    not leaks unless a line labels them as the answer)."""
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    # each text as written and with its `\n`, `\t` escapes read as what they write
    flat = {w: t + "\n" + t.replace("\\n", "\n").replace("\\t", "\t") for w, t in visible.items()}
    for p, values in sorted(computed.items()):
        whole = texts.get(p, "").strip()
        for where, text in visible.items():
            base = posixpath.basename(where)
            found: list[tuple[str, str]] = []
            multiline = multiline_text(whole)
            if multiline and where not in inputs and normalize(whole) in normalize(text):
                found.append((whole[:60], f"{where} holds the whole computed output {p}"))
            content = text.strip()
            if (
                short_value(whole)
                and is_channel(where)
                and where not in inputs
                and where != f"image:{p}"
                and any(ln.strip() == whole for ln in text.splitlines())
            ):
                found.append((whole, f"{where} ({channel_kind(where)}) holds the whole of {p}"))
            lines = {ln.strip() for ln in whole.splitlines() if tokens(ln) & values}
            if content in lines and where not in inputs and where != "instruction.md":
                found.append(
                    (content[:60], f"{where} holds a computed line of {p} and nothing else")
                )
            if len(lines) >= 2 and where not in inputs and where != "instruction.md":
                if all(_bounded(ln, flat[where]) for ln in lines):
                    first = sorted(lines)[0]
                    why = f"{where} holds every computed line of {p} ({len(lines)} lines)"
                    found.append((first[:60], why))
            for v in sorted(values):
                if not _bounded(v, text):
                    continue
                label = labelled_line(v, text)
                if ANSWERISH_FILE.search(base) and where != "instruction.md":
                    found.append((v, f"{where} (named like an answer) holds {v!r}"))
                elif text.strip() == v and where not in inputs:
                    found.append((v, f"{where} holds {v!r} and nothing else"))
                elif label is not None:
                    found.append((v, f"{where} labels it: {label[:100]!r}"))
                elif is_channel(where) and where not in inputs and whole_field(v, text):
                    kind = channel_kind(where)
                    found.append((v, f"{where} ({kind} never named) holds {v!r} as a field"))
            for v, why in found:
                if (v, where) in seen:
                    continue
                seen.add((v, where))
                why += f"; {v!r} is computed (it changes in {p} when the inputs change)"
                out.append(
                    Finding(code=Code.TEST_LEAKAGE, source=Source.TRIAL, item=v, evidence=why)
                )
    return out


def multiline_text(text: str) -> bool:
    """Long enough that standing whole elsewhere is no coincidence: 2 lines, 20 characters."""
    whole = text.strip()
    return len(whole.splitlines()) >= 2 and len(whole) >= 20


def _json(text: str) -> object | None:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _parts(value: object) -> list[object]:
    """Every dict and list inside a JSON value, itself included."""
    if isinstance(value, dict):
        return [value, *(p for v in value.values() for p in _parts(v))]
    if isinstance(value, list):
        return [value, *(p for v in value for p in _parts(v))]
    return []


def _leaves(value: object) -> int:
    if isinstance(value, dict):
        return sum(_leaves(v) for v in value.values())
    if isinstance(value, list):
        return sum(_leaves(v) for v in value)
    return 1


def shipped_answers(
    outputs: Mapping[str, str],
    shipped: Mapping[str, str],
    instruction: str,
    unread: Collection[str],
) -> list[Finding]:
    """A checked output as the reference solution leaves it, whole, in a file the task ships
    at another path that the solution never opened and the instruction never names: an
    editor's backup of the fixed config, a generator's record of the data it made. What the
    agent can copy instead of doing the work, found by what the solution wrote, not by the
    file's name. The same for a JSON output whose data (3 values or more) stands as a part of
    a shipped JSON file, in any key order.

    `outputs`: {image path: text} the solution wrote or changed that the verifier checks;
    `shipped`: {image path: text} of the environment's files; `unread`: those of them the
    solution never opened (traced) and the instruction never names. An output the
    instruction itself spells is given, not leaked."""
    out = []
    kept = {q: shipped[q] for q in sorted(unread) if q in shipped}
    parsed = {q: _json(t) for q, t in kept.items()}
    for p, text in sorted(outputs.items()):
        whole = normalize(text)
        if not multiline_text(text):
            continue
        if whole in normalize(instruction) or normalize(shipped.get(p, "")) == whole:
            continue
        data = _json(text)
        parts = data is not None and _leaves(data) >= 3
        for q, t in kept.items():
            if q == p:
                continue
            why = ""
            if normalize(t) == whole:
                why = f"{q} holds {p} as the reference solution leaves it"
            elif parts and parsed[q] is not None and data in _parts(parsed[q]):
                why = f"{q} holds the data of {p} as the reference solution leaves it"
            if why:
                why += "; the solution never read it and the instruction never names it"
                out.append(
                    Finding(code=Code.TEST_LEAKAGE, source=Source.TRIAL, item=q, evidence=why)
                )
    return out
