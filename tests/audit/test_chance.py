"""A verdict decided by chance (docs/audit.md, "Chance"): the blind set's
`flaky--chi-square-sampler` judges 400 runs of the agent's sampler with a 5% chi-square test,
so its reference fails about 1 run in 20 and plain reruns found that only by luck. Rerun with
every process of the verifier drawing the same entropy (the agent's programs that a test runs
included), its uniformity test fails and its other tests do not: the verdict depends on chance
(`stochastic_verdict`), and plain reruns then look for the reference failing by it. A clean
control of the same set keeps its verdict.

Before: the agent's programs read nothing a rerun condition staged with the tests (held out
from them), so the sampler drew real entropy in every condition and the rerun changed nothing.
"""

from __future__ import annotations

import itertools
from functools import partial
from pathlib import Path

import pytest

from audit.judge_exec import ExecConfig, run_exec_judge
from audit.rubric import Dimension
from audit.verdict import Code
from sandbox.trial import run_trial
from tasks.corpus import import_dir
from tests.audit.forms import OFF, decision, texts

pytestmark = pytest.mark.sandbox

SET = Path(__file__).resolve().parents[1] / "fixtures" / "audit-blind"
SAMPLER = "flaky--chi-square-sampler"
CONTROL = "clean--dupfind-script"  # a program the tests run many times, on input they make


# A real trial of the sampler fails its test about 1 run in 20 (what the judge looks for): these
# tests draw the reference trial and its plain reruns again while chance fails them, so that only
# what a test scripts decides its outcome (four such draws fail together about 1 time in 160,000).
DRAWS = 4


def _unless_chance(run):
    from audit.trials import EffectsOracleAgent

    def drawn(t, agent, **kw):
        plain = agent == "oracle" or isinstance(agent, EffectsOracleAgent)
        result = run(t, agent, **kw)
        for _ in range(DRAWS - 1 if plain else 0):
            if result.resolved or not result.rewardable:
                break
            result = run(t, agent, **kw)
        return result

    return drawn


def _tasks():
    return {t.id: t for t in import_dir(SET)[0]}


def _chance(ev):
    return [f for f in ev.findings if f.item == "entropy"]


def _named(drawn) -> None:
    [found] = _chance(drawn)
    assert found.code == Code.STOCHASTIC_VERDICT, texts(drawn)
    # only the test of the draws changed: printing one tip and rereading the file did not
    assert "['test_outputs::test_uniform_choice']" in found.evidence, found.evidence
    assert drawn.measures["stochastic_verdict"] == 1.0


def _clean(clean) -> None:
    assert [f.code for f in _chance(clean)] == [Code.RERUN_STABLE], texts(clean)
    assert clean.measures["stochastic_verdict"] == 0.0 and not decision(clean).hard


def test_a_chance_rerun_that_fails_the_reference_is_a_flaky_verifier():
    """Local backend: the sampler's verdict is named as decided by chance, and the plain
    reruns that follow are read as any rerun: one whose verdict differs makes the verifier
    flaky. Chance is scripted there (the sampler fails its test about 1 run in 20): the second
    rerun is served a real trial in which every draw came out the same, the draw chance makes
    with probability 10^-399; the rest are real (drawn again while chance fails them, as the
    reference is). A clean control keeps its verdict."""
    from audit.trials import Condition, ConditionAgent
    from audit.variants import condition_task

    tasks = _tasks()
    asked = itertools.count(1)
    plain: list[int] = []
    real = _unless_chance(partial(run_trial, backend="local"))

    def runner(t, agent, **kw):
        if agent == "oracle":  # a plain rerun: only the chance reruns are plain here
            plain.append(n := next(asked))
            if n == 2:  # chance failing the reference: the case
                worst = ConditionAgent(Condition("entropy", entropy=True))
                return run_trial(condition_task(t, "entropy"), worst, backend="local")
        return real(t, agent, **kw)

    cfg = ExecConfig(**{**OFF, "chance": True, "chance_reruns": 3}, workers=2)
    ev = run_exec_judge(tasks[SAMPLER], cfg, runner=runner)
    _named(ev)
    assert len(plain) == 3 and ev.measures["chance_reruns"] == 3.0
    flaky = [f for f in ev.findings if f.code == Code.FLAKY_VERIFIER]
    assert [f.item for f in flaky] == ["chance-2"], texts(ev)
    assert "test_uniform_choice" in flaky[0].evidence
    assert Code.FLAKY_VERIFIER.value in decision(ev).hard
    _clean(run_exec_judge(tasks[CONTROL], cfg))


@pytest.mark.docker
def test_a_verdict_drawn_by_chance_is_named_on_the_docker_backend(docker_engine):
    """The same through the Docker API, without the reruns: named as decided by chance, softer
    (not a reject by itself); the clean control keeps its verdict."""
    tasks = _tasks()
    cfg = ExecConfig(**{**OFF, "chance": True, "chance_reruns": 0}, backend="docker", workers=2)
    real = _unless_chance(partial(run_trial, backend="docker"))
    drawn = run_exec_judge(tasks[SAMPLER], cfg, runner=real)
    _named(drawn)
    decided = decision(drawn)
    assert not decided.hard and decided.scores[Dimension.FAIRNESS] == 0.8
    _clean(run_exec_judge(tasks[CONTROL], cfg))


# Other honest solutions of the sampler. Bash seeds `$RANDOM` from its clock and pid, never
# from an entropy call; Perl reads /dev/urandom through glibc's fortified open (`__open64_2`),
# which the library had not answered: the draws of both were left free.
SAMPLERS = {
    "bash": """#!/bin/bash
mapfile -t tips < <(grep . /app/tips.txt)
echo "${tips[RANDOM % ${#tips[@]}]}"
""",
    "perl": """#!/usr/bin/perl
open my $f, "<", "/app/tips.txt" or die; my @tips = grep { /\\S/ } <$f>; print $tips[rand @tips];
""",
}


@pytest.mark.parametrize("language", list(SAMPLERS))
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_sampler_in_another_language_is_named(backend, language, request):
    """Before: the same sampler written in bash or Perl kept its verdict when every process
    drew the same entropy (`rerun_stable` on both backends). Every bash of the verifier now
    seeds `$RANDOM` the same from the condition script it sources first, and the library
    answers glibc's fortified opens of the random devices too."""
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    solve = f"#!/bin/bash\ncat > /app/tip.sh <<'SH'\n{SAMPLERS[language]}SH\nchmod +x /app/tip.sh\n"
    task = _tasks()[SAMPLER].model_copy(update={"solution": {"solve.sh": solve.encode()}})
    cfg = ExecConfig(**{**OFF, "chance": True, "chance_reruns": 0}, backend=backend, workers=2)
    drawn = run_exec_judge(task, cfg, runner=_unless_chance(partial(run_trial, backend=backend)))
    assert drawn.measures["oracle_passed"] == 3.0, texts(drawn)
    _named(drawn)
